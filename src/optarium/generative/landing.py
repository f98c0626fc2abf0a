r"""Landing-based constrained diffusion: OLLA / ULLA samplers and their projected (-P) counterparts.

Paper: K. Jeon, M. Muehlebach, M. Tao, "Efficient Diffusion Models under Nonconvex Equality and Inequality
Constraints via Landing", ICML 2026 (arXiv 2604.17838; official code
``KraitGit/efficient-constrained-diffusion``, MIT). The paper body was not read: every rule below follows
the spec ``constrained-diffusion-landing.md``,
which restates the official code; nothing was copied.

Feasible set :math:`\Sigma=\{x: h(x)=0,\ g(x)\le 0\}` (:class:`Constraints`). At ``x`` the active rows are all
equalities and the inequalities with :math:`g_j(x)\ge -c` (cut-off ``c = 0``); their gradients form ``J``
(inactive rows zero) and :math:`M = JJ^\top + 10^{-6} I`.

- tangent projection :math:`P_x v = v - J^\top M^{-1} J v`;
- landing residual :math:`r = [h;\ g_{act} + \epsilon_b]` (``boundary_repulsion`` :math:`\epsilon_b=0.1`);
  explicit landing :math:`x' = x + \text{step} - \alpha\sigma^2|\Delta t| J(x)^\top M(x)^{-1} r(x)`
  (requires :math:`\alpha\sigma_{max}^2|\Delta t|<1`, checked), implicit landing (default)
  :math:`y = x+\text{step},\ x' = y - J(y)^\top M(y)^{-1} r(y)`;
- projection (the -P samplers every step, the landing samplers once at the end): Gauss-Newton with an active
  set (equalities + violated / near-active inequalities, inequalities with a negative multiplier dropped),
  at most 30 iterations, tolerance 1e-6; trajectories that fail are dropped and counted.

Overdamped (OLLA, OLLA-P):
:math:`x \leftarrow \mathcal C(x, P_x(\sigma^2 d\,|\Delta t|/2 + \sigma\sqrt{|\Delta t|} z))`
with drift :math:`d=b(x)` forward and :math:`d = s_\theta(x,t) - b(x)` in reverse (as the official code
writes it:
:math:`s_\theta` is the learned drift that the path loss fits, not necessarily the score).
Underdamped (ULLA, ULLA-P): :math:`a = e^{-\sigma^2|\Delta t|\gamma}`, velocity re-derived from positions,
:math:`v = P_x((x_k - x_{k-1})/(\sigma_{k-1}^2\Delta t))`,
:math:`v' = a v + \sigma^2|\Delta t|\,d + \sqrt{1-a^2} z`, position step :math:`\sigma^2 \Delta t\, P_x(v')`,
with :math:`\Delta t` negative in reverse time (so the reverse
velocity is the forward velocity of the path, which is what the underdamped path loss uses).

Training (:meth:`LandingDiffusion.fit`): the path-matching loss on forward paths simulated from the data (see
:meth:`LandingDiffusion.path_loss`), Adam with EMA and ReduceLROnPlateau, optional ``time_subsample = k``
(``k`` random steps per path, rescaled by ``N / k``: unbiased for the full sum).

Deviations / reconstructions (all from the spec, none from the paper text):

- ``time_subsample`` (``k`` random steps per path, rescaled by ``N / k``) and the explicit-landing guard
  :math:`\alpha\sigma_{max}^2|\Delta t|<1` (``ValueError`` otherwise) are the spec's additions; the official
  code has neither;
- the projection is the generic Gauss-Newton projection for every set, also on S^2 (the official Sphere
  class uses a closed-form retraction);
- the sign convention of the underdamped reverse step is the spec's (signed :math:`\Delta t`); with
  :math:`s_\theta \equiv 0` both directions are the same process;
- network: an MLP with SiLU and the time concatenated (input ``d + 1``, or ``2d + 1`` underdamped); the
  code default is 5 x 512, tests and experiments use smaller nets;
- cost counters: ``jacobian_evals`` counts per-particle constraint-Jacobian evaluations (each landing step
  one, each Gauss-Newton iteration one, tangent projections one), ``newton_iters`` the per-particle
  Gauss-Newton iterations of projections, ``nfe`` per-particle network evaluations; ``path_bytes`` is the
  storage of the simulated training paths; measured peaks come from :class:`PeakTensorMemory` (peak bytes of
  tensor storage allocated in a block, tracked through a torch dispatch mode; ``tracemalloc`` does not see
  torch's CPU allocator).

Connected components: :class:`Constraints` takes an optional ``component`` test (e.g. ``det R > 0``, since
``{R^T R = I}`` is O(3), two components); the samplers drop and count
(``extras["wrong_component"]``) trajectories that leave the intended component. Networks without parameters
(exact scores) run in the particles' dtype. SO(3) (the constraint set, exact matrix-Fisher data and score,
the Newton-vs-polar facts, a rotation MMD) is in :mod:`optarium.generative.landing_so3`.

Data and metric helpers for the S^2 experiments: :func:`vmf_sample` / :func:`vmf_mixture` (exact inverse-CDF
von Mises-Fisher sampler on S^2), :func:`tetrahedron` (cluster centres forming a spherical 2-design),
:func:`sphere_uniform`, and :func:`latlon_jsd` (the spec's quality metric: JSD of 36 x 18 lon/lat histograms,
natural log, the square of scipy's ``jensenshannon``).
"""

from __future__ import annotations

import copy
import itertools
import math
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from optarium._core.result import Result, Trace
from optarium._core.solver import SolverLoop
from optarium._core.validation import check_choice, check_int, check_nonnegative, check_positive

__all__ = [
    "SAMPLERS",
    "Constraints",
    "LandingDiffusion",
    "NoiseSchedule",
    "PeakTensorMemory",
    "latlon_jsd",
    "mlp",
    "solver_cases",
    "sphere_constraints",
    "sphere_uniform",
    "tetrahedron",
    "vmf_mixture",
    "vmf_sample",
]

SAMPLERS = ("OLLA", "OLLA-P", "ULLA", "ULLA-P")

Fn = Callable[[torch.Tensor], torch.Tensor]


class Constraints:
    """Equality ``h(x) = 0`` (shape ``(..., m)``) and inequality ``g(x) <= 0`` (``(..., l)``) in R^d.

    ``h`` and ``g`` map a batch ``(n, d)`` to ``(n, m)`` / ``(n, l)`` and must work on a single point ``(d,)``
    too. They must act pointwise (row i of the output depends on row i of the input only): the Jacobian rows
    are gradients of the column sums (``m + l`` backward passes, much cheaper than ``vmap(jacrev)``).
    ``reg`` is the Gram regulariser (``0`` switches it off: pseudo-inverse), ``cutoff`` the activity
    cut-off of inequalities. ``component`` (optional) maps ``(n, d)`` to a bool ``(n,)``: True where a point
    lies on the intended connected component of the set (e.g. ``det R > 0`` for SO(3) inside O(3) =
    ``{R^T R = I}``); the samplers drop and count (``extras["wrong_component"]``) trajectories that leave it.
    """

    def __init__(
        self,
        dim: int,
        h: Fn | None = None,
        g: Fn | None = None,
        *,
        reg: float = 1e-6,
        cutoff: float = 0.0,
        component: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        self.dim = check_int("dim", dim, minimum=1)
        if h is None and g is None:
            raise ValueError("h: give at least one of h and g")
        for name, f in (("h", h), ("g", g), ("component", component)):
            if f is not None and not callable(f):
                raise TypeError(f"{name}: must be callable, got {type(f).__name__}")
        self.h, self.g = h, g
        self.component = component
        self.reg = check_nonnegative("reg", reg)
        self.cutoff = check_nonnegative("cutoff", cutoff)
        probe = torch.zeros(2, self.dim, dtype=torch.float64) + 0.3
        self.m = self._count("h", h, probe)
        self.l = self._count("g", g, probe)
        self.jacobian_evals = 0
        if component is not None:
            out = component(probe)
            if not isinstance(out, torch.Tensor) or out.dtype != torch.bool or tuple(out.shape) != (2,):
                raise ValueError(
                    f"component: must map (n, d) to a bool tensor (n,), got {getattr(out, 'dtype', out)} "
                    f"{tuple(getattr(out, 'shape', ()))} for input (2, {self.dim})"
                )

    @staticmethod
    def _count(name: str, f: Fn | None, probe: torch.Tensor) -> int:
        if f is None:
            return 0
        out = f(probe)
        if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != probe.shape[0]:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(
                f"{name}: must map (n, d) to (n, k), got {shape} for input (2, {probe.shape[1]})"
            )
        single = f(probe[0])
        if not isinstance(single, torch.Tensor) or tuple(single.shape) != (out.shape[1],):
            raise ValueError(
                f"{name}: must map a single point (d,) to (k,), got {getattr(single, 'shape', None)}"
            )
        return int(out.shape[1])

    # ------------------------------------------------------------------ values and Jacobians
    def _all(self, x: torch.Tensor) -> torch.Tensor:
        parts = []
        if self.h is not None:
            parts.append(self.h(x))
        if self.g is not None:
            parts.append(self.g(x))
        return torch.cat(parts, dim=-1)

    def values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h(x), g(x))`` with empty trailing dimensions for absent parts."""
        c = self._all(x)
        return c[..., : self.m], c[..., self.m :]

    def jacobian(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(c(x), J(x))``: all constraint values ``(n, m + l)`` and Jacobians ``(n, m + l, d)``."""
        self.jacobian_evals += x.shape[0]
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            c = self._all(xg)
            # the constraints act pointwise, so row j of every point's Jacobian is the gradient of sum_i c_ij
            rows = [
                torch.autograd.grad(c[:, j].sum(), xg, retain_graph=j + 1 < c.shape[1])[0]
                for j in range(c.shape[1])
            ]
        return c.detach(), torch.stack(rows, dim=1)

    def off_component(self, x: torch.Tensor) -> torch.Tensor:
        """Bool ``(n,)``: points on a wrong connected component (always False without ``component``)."""
        if self.component is None:
            return torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
        return ~self.component(x)

    def violation(self, x: torch.Tensor) -> torch.Tensor:
        """Per-point ``max(|h|, g_+)`` (``0`` when feasible)."""
        h, g = self.values(x)
        parts = [h.abs(), g.clamp_min(0.0)]
        v = torch.cat(parts, dim=-1)
        return v.amax(dim=-1) if v.shape[-1] else torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)

    def active(self, c: torch.Tensor) -> torch.Tensor:
        """Mask ``(n, m + l)``: every equality, inequalities with ``g >= -cutoff``."""
        act = torch.ones_like(c, dtype=torch.bool)
        act[..., self.m :] = c[..., self.m :] >= -self.cutoff
        return act

    def _solve(self, J: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
        """``M^{-1} rhs`` with ``M = J J^T + reg I`` (pseudo-inverse when ``reg = 0``)."""
        M = J @ J.transpose(-1, -2)
        if M.shape[-1] == 1:  # one constraint: a scalar division (the common case, and much faster)
            m = M[..., 0]
            if self.reg > 0:
                return rhs / (m + self.reg)
            return torch.where(m > 0, rhs / torch.where(m > 0, m, torch.ones_like(m)), torch.zeros_like(rhs))
        if self.reg > 0:
            M = M + self.reg * torch.eye(M.shape[-1], dtype=M.dtype, device=M.device)
            return torch.linalg.solve(M, rhs.unsqueeze(-1)).squeeze(-1)
        return (torch.linalg.pinv(M, hermitian=True) @ rhs.unsqueeze(-1)).squeeze(-1)

    def tangent(self, x: torch.Tensor, v: torch.Tensor, J: torch.Tensor | None = None) -> torch.Tensor:
        """:math:`P_x v = v - J^T M^{-1} J v` with the active rows of ``J`` at ``x``."""
        if J is None:
            c, J = self.jacobian(x)
            J = J * self.active(c).unsqueeze(-1)
        Jv = (J @ v.unsqueeze(-1)).squeeze(-1)
        return v - (J.transpose(-1, -2) @ self._solve(J, Jv).unsqueeze(-1)).squeeze(-1)

    def landing_direction(self, x: torch.Tensor, boundary_repulsion: float) -> torch.Tensor:
        """:math:`J^T M^{-1} r(x)` with :math:`r = [h; g_{act} + \\epsilon_b]` (inactive rows zero)."""
        c, J = self.jacobian(x)
        act = self.active(c)
        r = c.clone()
        r[..., self.m :] = r[..., self.m :] + boundary_repulsion
        r = torch.where(act, r, torch.zeros_like(r))
        J = J * act.unsqueeze(-1)
        return (J.transpose(-1, -2) @ self._solve(J, r).unsqueeze(-1)).squeeze(-1)

    def project(
        self, x: torch.Tensor, *, max_iter: int = 30, tol: float = 1e-6
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Gauss-Newton projection onto the set: ``(x, converged mask, total per-particle iterations)``.

        Active set: equalities and inequalities with ``g > -tol`` (violated or near-active); inequalities
        whose multiplier comes out negative are dropped and the step recomputed. Converged particles are
        frozen; the others stop after ``max_iter`` iterations (reported as not converged).
        """
        x = x.clone()
        done = self.violation(x) <= tol
        iters = 0
        for _ in range(max_iter):
            if bool(done.all()):
                break
            idx = (~done).nonzero().squeeze(-1)
            xi = x[idx]
            c, J = self.jacobian(xi)
            iters += int(idx.numel())
            act = torch.ones_like(c, dtype=torch.bool)
            act[:, self.m :] = c[:, self.m :] > -tol
            for _drop in range(2):
                Ja = J * act.unsqueeze(-1)
                lam = self._solve(Ja, torch.where(act, c, torch.zeros_like(c)))
                neg = torch.zeros_like(act)
                neg[:, self.m :] = (lam[:, self.m :] < 0) & act[:, self.m :] & (c[:, self.m :] <= 0)
                if not bool(neg.any()):
                    break
                act = act & ~neg
            xi = xi - (Ja.transpose(-1, -2) @ lam.unsqueeze(-1)).squeeze(-1)
            x[idx] = xi
            done[idx] = self.violation(xi) <= tol
        ok = done & torch.isfinite(x).all(dim=-1)
        return x, ok, iters


class NoiseSchedule:
    """Noise level :math:`\\sigma(t)` on ``[0, T]`` with ``N`` steps (linear or geometric in ``t``),
    base drift ``b(x) = 0`` (``"zero"``) or ``-x`` (``"linear"``)."""

    def __init__(
        self,
        sigma_min: float = 0.01,
        sigma_max: float = 1.0,
        T: float = 4.0,
        N: int = 100,
        *,
        kind: str = "linear",
        drift: str = "zero",
    ) -> None:
        self.sigma_min = check_positive("sigma_min", sigma_min)
        self.sigma_max = check_positive("sigma_max", sigma_max)
        if self.sigma_max < self.sigma_min:
            raise ValueError(f"sigma_max: must be >= sigma_min, got {sigma_max} < {sigma_min}")
        self.T = check_positive("T", T)
        self.N = check_int("N", N, minimum=1)
        self.kind = check_choice("kind", kind, ("linear", "geometric"))
        self.drift = check_choice("drift", drift, ("zero", "linear"))

    @property
    def dt(self) -> float:
        return self.T / self.N

    def times(self) -> list[float]:
        """``t_k = k dt`` for ``k = 0..N``."""
        return [k * self.dt for k in range(self.N + 1)]

    def sigma(self, t: float) -> float:
        u = min(max(t / self.T, 0.0), 1.0)
        if self.kind == "linear":
            return self.sigma_min + u * (self.sigma_max - self.sigma_min)
        return self.sigma_min * (self.sigma_max / self.sigma_min) ** u

    def base_drift(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x) if self.drift == "zero" else -x


def mlp(sizes: list[int], *, dtype: torch.dtype = torch.float32) -> nn.Sequential:
    """An MLP with SiLU between the linear layers (``sizes = [in, hidden..., out]``)."""
    if len(sizes) < 2:
        raise ValueError(f"sizes: need at least [in, out], got {sizes}")
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b, dtype=dtype))
        if i < len(sizes) - 2:
            layers.append(nn.SiLU())
    return nn.Sequential(*layers)


class LandingDiffusion:
    """A constrained diffusion model with one of the samplers OLLA, OLLA-P, ULLA, ULLA-P.

    Args:
        constraints: the feasible set.
        schedule: the noise schedule.
        sampler: ``"OLLA"``/``"ULLA"`` (landing) or ``"OLLA-P"``/``"ULLA-P"`` (Gauss-Newton projection).
        alpha: explicit landing rate (unused in implicit mode; explicit needs
            ``alpha * sigma_max**2 * dt < 1``).
        gamma: friction of the underdamped samplers.
        landing: ``"implicit"`` (one Gauss-Newton step at the new point, the code's S^2 default) or
            ``"explicit"``.
        boundary_repulsion: :math:`\\epsilon_b`, added to active inequality residuals.
        net: the drift network, called on ``cat([x, t])`` (overdamped) or ``cat([x, v, t])`` (underdamped);
            ``None`` means :math:`s_\\theta \\equiv 0` until :meth:`fit` builds a default MLP.
        proj_max_iter, proj_tol: the Gauss-Newton projection's budget and tolerance.
    """

    def __init__(
        self,
        constraints: Constraints,
        schedule: NoiseSchedule,
        sampler: str = "OLLA",
        *,
        alpha: float = 50.0,
        gamma: float = 5.0,
        landing: str = "implicit",
        boundary_repulsion: float = 0.1,
        net: nn.Module | None = None,
        hidden: tuple[int, ...] = (512,) * 5,
        proj_max_iter: int = 30,
        proj_tol: float = 1e-6,
    ) -> None:
        if not isinstance(constraints, Constraints):
            raise TypeError(f"constraints: expected Constraints, got {type(constraints).__name__}")
        if not isinstance(schedule, NoiseSchedule):
            raise TypeError(f"schedule: expected NoiseSchedule, got {type(schedule).__name__}")
        self.C, self.sched = constraints, schedule
        self.sampler = check_choice("sampler", sampler, SAMPLERS)
        self.alpha = check_positive("alpha", alpha)
        self.gamma = check_positive("gamma", gamma)
        self.landing = check_choice("landing", landing, ("implicit", "explicit"))
        self.boundary_repulsion = check_nonnegative("boundary_repulsion", boundary_repulsion)
        if net is not None and not isinstance(net, nn.Module):
            raise TypeError(f"net: expected a torch.nn.Module, got {type(net).__name__}")
        self.net = net
        self.ema: nn.Module | None = None
        self.hidden = tuple(check_int("hidden", h, minimum=1) for h in hidden)
        self.proj_max_iter = check_int("proj_max_iter", proj_max_iter, minimum=1)
        self.proj_tol = check_positive("proj_tol", proj_tol)
        if self.landing == "explicit":
            c = self.alpha * schedule.sigma_max**2 * schedule.dt
            if c >= 1.0:
                raise ValueError(
                    f"alpha: explicit landing needs alpha * sigma_max^2 * dt < 1, got {c:.3g} (unstable / "
                    "non-monotone); lower alpha or dt, or use landing='implicit'"
                )

    @property
    def underdamped(self) -> bool:
        return self.sampler.startswith("ULLA")

    @property
    def projected(self) -> bool:
        return self.sampler.endswith("-P")

    # ------------------------------------------------------------------ building blocks
    def _net_in(self, x: torch.Tensor, v: torch.Tensor | None, t: float) -> torch.Tensor:
        tt = torch.full((x.shape[0], 1), t, dtype=x.dtype, device=x.device)
        return torch.cat([x, v, tt] if self.underdamped else [x, tt], dim=-1)

    def drift_net(
        self, x: torch.Tensor, v: torch.Tensor | None, t: float, *, use_ema: bool = False
    ) -> torch.Tensor:
        net = self.ema if (use_ema and self.ema is not None) else self.net
        if net is None:
            return torch.zeros_like(x)
        p = next(net.parameters(), None)  # a parameterless module (an exact score) runs in x's dtype
        return net(self._net_in(x, v, t).to(x.dtype if p is None else p.dtype)).to(x.dtype)

    def correct(
        self, x: torch.Tensor, step: torch.Tensor, c: float, stats: dict[str, float]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The correction :math:`\\mathcal C(x, \\text{step})`: landing or projection; ``(x', ok mask)``."""
        if self.projected:
            y, ok, it = self.C.project(x + step, max_iter=self.proj_max_iter, tol=self.proj_tol)
            stats["newton_iters"] += it
            return y, ok
        ok = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
        if self.landing == "explicit":
            return x + step - c * self.C.landing_direction(x, self.boundary_repulsion), ok
        y = x + step
        return y - self.C.landing_direction(y, self.boundary_repulsion), ok

    def simulate(
        self,
        x0: torch.Tensor,
        *,
        reverse: bool,
        generator: torch.Generator | None = None,
        use_ema: bool = True,
        noise: torch.Tensor | None = None,
        keep_path: bool = False,
        v0: torch.Tensor | None = None,
    ) -> dict[str, Any]:
        """Run the chosen sampler forward (from data) or in reverse (from the prior samples ``x0``).

        ``noise`` (shape ``(N, n, d)`` or ``(N + 1, n, d)`` for the underdamped initial velocity) replaces the
        Gaussian draws (common random numbers across samplers). Returns the final points, the alive mask,
        the counters, the per-step max violation and (``keep_path``) the positions ``(N + 1, n, d)``.
        """
        s = self.sched
        N, dt = s.N, s.dt
        x = x0.clone()
        n, d = x.shape
        stats = {"newton_iters": 0.0, "nfe": 0.0}
        j0 = self.C.jacobian_evals
        wrong = torch.zeros(n, dtype=torch.bool, device=x.device)
        alive = torch.ones(n, dtype=torch.bool, device=x.device)
        times = s.times()
        order = list(range(N, 0, -1)) if reverse else list(range(N))
        sdt = -dt if reverse else dt

        def z(k: int) -> torch.Tensor:
            if noise is not None:
                return noise[k].to(dtype=x.dtype, device=x.device)
            return torch.randn(n, d, dtype=x.dtype, device=x.device, generator=generator)

        path = [x.clone()] if keep_path else None
        viol: list[float] = []
        v = None
        prev_sigma = None
        if self.underdamped:
            if v0 is not None:
                init = v0
            elif noise is not None and noise.shape[0] > N:
                init = noise[N].to(dtype=x.dtype, device=x.device)
            else:
                init = torch.randn(n, d, dtype=x.dtype, device=x.device, generator=generator)
            v = self.C.tangent(x, init)
        x_prev = None
        for i, k in enumerate(order):
            t = times[k]
            sigma = s.sigma(t)
            c_land = self.alpha * sigma**2 * dt
            if self.underdamped:
                if x_prev is not None:
                    v = self.C.tangent(x, (x - x_prev) / (prev_sigma**2 * sdt))
                a = math.exp(-(sigma**2) * dt * self.gamma)
                drift = s.base_drift(x)
                if reverse:
                    drift = self.drift_net(x, v, t, use_ema=use_ema) - drift
                    stats["nfe"] += n
                v_new = a * v + sigma**2 * dt * drift + math.sqrt(max(1.0 - a * a, 0.0)) * z(i)
                step = sigma**2 * sdt * self.C.tangent(x, v_new)
            else:
                drift = s.base_drift(x)
                if reverse:
                    drift = self.drift_net(x, None, t, use_ema=use_ema) - drift
                    stats["nfe"] += n
                step = self.C.tangent(x, sigma**2 * drift * dt / 2 + sigma * math.sqrt(dt) * z(i))
            x_prev = x
            x, ok = self.correct(x, step, c_land, stats)
            alive &= ok & torch.isfinite(x).all(dim=-1)
            if self.C.component is not None:  # left the intended component (e.g. det R < 0): drop, count
                off = alive & self.C.off_component(x)
                wrong |= off
                alive &= ~off
            prev_sigma = sigma
            viol.append(float(self.C.violation(x[alive]).max()) if bool(alive.any()) else 0.0)
            if path is not None:
                path.append(x.clone())
        out = {
            "x": x,
            "alive": alive,
            "newton_iters": stats["newton_iters"],
            "nfe": stats["nfe"],
            "jacobian_evals": float(self.C.jacobian_evals - j0),
            "violation_path": viol,
            "wrong_component": wrong,
        }
        if path is not None:
            out["path"] = torch.stack(path)
        return out

    # ------------------------------------------------------------------ sampling
    def sample(
        self,
        n: int | None = None,
        *,
        prior: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        noise: torch.Tensor | None = None,
        reverse: bool = True,
        terminal_projection: bool = True,
        use_ema: bool = True,
    ) -> Result:
        """Sample by running the sampler in reverse from ``prior`` (points on the set; required: the prior
        of a generic set has no closed form) and, for landing samplers, one terminal projection.

        ``reverse=False`` runs the forward (noising) process instead (used for the s = 0 comparisons).
        Returns a :class:`Result`: ``x`` the kept samples, ``value`` their max violation, ``status``
        ``"converged"`` when every kept sample is within ``proj_tol``, ``n_iter = N``, the per-step max
        violation in ``history``, and ``extras`` (``nfe``, ``jacobian_evals``, ``newton_iters``,
        ``dropped`` (all dropped trajectories), ``wrong_component`` (those of them dropped for leaving the
        constraint set's intended component, see :class:`Constraints`), ``kept``, ``max_violation_path``).
        """
        if prior is None:
            raise ValueError("prior: give the starting points (n, d) on the feasible set")
        if not isinstance(prior, torch.Tensor) or prior.ndim != 2 or prior.shape[1] != self.C.dim:
            raise ValueError(
                f"prior: expected a tensor (n, {self.C.dim}), got {getattr(prior, 'shape', prior)}"
            )
        if n is not None and check_int("n", n, minimum=1) != prior.shape[0]:
            raise ValueError(f"n: {n} does not match prior's {prior.shape[0]} points")
        t0 = time.perf_counter()
        with torch.no_grad():
            out = self.simulate(prior, reverse=reverse, generator=generator, use_ema=use_ema, noise=noise)
            x, alive = out["x"], out["alive"]
            newton = out["newton_iters"]
            jac = out["jacobian_evals"]
            if terminal_projection and not self.projected:
                j0 = self.C.jacobian_evals
                xp, ok, it = self.C.project(x, max_iter=self.proj_max_iter, tol=self.proj_tol)
                newton += it
                jac += self.C.jacobian_evals - j0
                x = xp
                alive &= ok
            wrong = out["wrong_component"] | (alive & self.C.off_component(x))
            alive &= ~wrong
        kept = x[alive]
        viol = float(self.C.violation(kept).max()) if kept.shape[0] else 0.0
        path_v = out["violation_path"]
        wall = time.perf_counter() - t0
        return Result(
            x=kept,
            value=viol,
            status="converged" if viol <= self.proj_tol * 10 else "max_iter",
            n_iter=self.sched.N,
            history=Trace.from_rows([{"step": i + 1, "max_violation": v} for i, v in enumerate(path_v)]),
            wall_time_s=wall,
            extras={
                "nfe": out["nfe"],
                "jacobian_evals": jac,
                "newton_iters": newton,
                "dropped": int((~alive).sum()),
                "wrong_component": int(wrong.sum()),
                "kept": alive,
                "max_violation_path": max(path_v) if path_v else 0.0,
            },
        )

    # ------------------------------------------------------------------ training
    def forward_paths(self, data: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Forward trajectories ``(N + 1, n, d)`` from ``data`` with the chosen sampler (no network)."""
        with torch.no_grad():
            return self.simulate(data, reverse=False, generator=generator, keep_path=True)["path"]

    def path_loss(
        self,
        paths: torch.Tensor,
        *,
        time_subsample: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """The path-matching loss :math:`\\tfrac12 E \\sum_n \\|G_n\\|^2` on ``paths`` ``(N + 1, B, d)``.

        ``time_subsample = k`` uses ``k`` random steps per path (rescaled by ``N / k``).
        """
        s = self.sched
        N, dt = s.N, s.dt
        if paths.ndim != 3 or paths.shape[0] != N + 1 or paths.shape[2] != self.C.dim:
            raise ValueError(f"paths: expected (N + 1 = {N + 1}, B, {self.C.dim}), got {tuple(paths.shape)}")
        B = paths.shape[1]
        sig = torch.tensor([s.sigma(t) for t in s.times()], dtype=paths.dtype, device=paths.device)
        tt = torch.tensor(s.times(), dtype=paths.dtype, device=paths.device)
        if time_subsample is None:
            idx = torch.arange(N, device=paths.device).unsqueeze(1).expand(N, B)
            scale = 1.0
        else:
            k = check_int("time_subsample", time_subsample, minimum=1, maximum=N)
            idx = torch.randint(0, N, (k, B), generator=generator, device=paths.device)
            scale = N / k
        cols = torch.arange(B, device=paths.device).unsqueeze(0).expand_as(idx)
        xn, xn1 = paths[idx, cols], paths[idx + 1, cols]
        K = idx.shape[0]
        flat = lambda a: a.reshape(K * B, -1)  # noqa: E731
        sn = sig[idx].reshape(-1, 1)
        t1 = tt[idx + 1].reshape(-1, 1)
        x1 = flat(xn1)
        b = self.sched.base_drift(x1)
        net = self.net
        assert net is not None
        if not self.underdamped:
            score = net(torch.cat([x1, t1], dim=-1).to(next(net.parameters()).dtype)).to(x1.dtype)
            r = flat(xn) - x1 - sn**2 * (score - b) * dt / 2
            G = self.C.tangent(x1, r) / (sn * math.sqrt(dt))
        else:
            nxt = torch.clamp(idx + 2, max=N)
            v1 = (paths[nxt, cols] - xn1) / (sig[idx + 1].view(K, B, 1) ** 2 * dt)
            last = (idx + 1 == N).unsqueeze(-1)
            v1 = torch.where(
                last, torch.randn(v1.shape, dtype=v1.dtype, device=v1.device, generator=generator), v1
            )
            v1 = self.C.tangent(x1, flat(v1))
            a = torch.exp(-(sn**2) * dt * self.gamma)
            score = net(torch.cat([x1, v1, t1], dim=-1).to(next(net.parameters()).dtype)).to(x1.dtype)
            mu = x1 - sn**2 * dt * (a * v1 + sn**2 * dt * (score - b))
            G = self.C.tangent(x1, flat(xn) - mu) / (torch.sqrt(1 - a * a) * sn**2 * dt)
        return 0.5 * scale * (G**2).sum(-1).reshape(K, B).sum(0).mean()

    def fit(
        self,
        data: torch.Tensor,
        *,
        iters: int = 20_000,
        batch_size: int = 128,
        lr: float = 2e-3,
        ema: float = 0.999,
        time_subsample: int | None = None,
        refresh_every: int | None = None,
        generator: torch.Generator | None = None,
        time_limit_s: float | None = None,
        record_every: int = 50,
    ) -> Result:
        """Train the drift network with the path loss; returns a :class:`Result` (loss trace in ``history``,
        ``x`` the EMA network's state dict, ``extras["path_bytes"]`` the training-path storage)."""
        if not isinstance(data, torch.Tensor) or data.ndim != 2 or data.shape[1] != self.C.dim:
            raise ValueError(f"data: expected a tensor (n, {self.C.dim}), got {getattr(data, 'shape', data)}")
        iters = check_int("iters", iters, minimum=0)
        batch_size = check_int("batch_size", batch_size, minimum=1)
        lr = check_positive("lr", lr)
        if not 0.0 <= float(ema) < 1.0:
            raise ValueError(f"ema: must be in [0, 1), got {ema}")
        if refresh_every is not None:
            refresh_every = check_int("refresh_every", refresh_every, minimum=1)
        d = self.C.dim
        if self.net is None:
            gen_state = torch.random.get_rng_state()
            if generator is not None:
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
            self.net = mlp([2 * d + 1 if self.underdamped else d + 1, *self.hidden, d], dtype=data.dtype).to(
                data.device
            )
            if generator is not None:
                torch.random.set_rng_state(gen_state)
        self.ema = copy.deepcopy(self.net)
        for p in self.ema.parameters():
            p.requires_grad_(False)
        opt = torch.optim.Adam(self.net.parameters(), lr=lr)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.6, patience=400, min_lr=1e-5)
        paths = self.forward_paths(data, generator)
        path_bytes = paths.numel() * paths.element_size()
        loop = SolverLoop(
            iters,
            tol=None,
            record_every=record_every,
            time_limit_s=time_limit_s,
            objective="loss",
            blowup=None,
        )
        n = data.shape[0]
        last = {"loss": math.nan}

        def batch() -> torch.Tensor:
            cols = torch.randint(0, n, (min(batch_size, n),), generator=generator, device=data.device)
            return self.path_loss(paths[:, cols], time_subsample=time_subsample, generator=generator)

        def evaluate(k: int) -> dict[str, float]:
            if k == 0:
                with torch.no_grad():
                    last["loss"] = float(batch())
            return {"loss": last["loss"]}

        for k in loop.iterate(evaluate):
            if refresh_every is not None and k > 0 and k % refresh_every == 0:
                paths = self.forward_paths(data, generator)
            loss = batch()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            lv = float(loss.detach())
            plateau.step(lv)
            with torch.no_grad():
                for pe, p in zip(self.ema.parameters(), self.net.parameters(), strict=True):
                    pe.mul_(ema).add_(p.detach(), alpha=1 - ema)
            last["loss"] = lv
        return loop.result(
            {k: v.detach().clone() for k, v in self.ema.state_dict().items()},
            value=lambda: last["loss"],
            extras={"path_bytes": float(path_bytes)},
        )


# ---------------------------------------------------------------------------------------------- S^2 helpers
def sphere_constraints(dim: int = 3, **kw: Any) -> Constraints:
    """``h(x) = ||x|| - 1`` on R^dim."""
    return Constraints(dim, h=lambda x: x.norm(dim=-1, keepdim=True) - 1.0, **kw)


def sphere_uniform(
    n: int, *, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """``n`` points uniform on S^2 (normalised Gaussians)."""
    n = check_int("n", n, minimum=1)
    x = torch.randn(n, 3, dtype=dtype, generator=generator)
    return x / x.norm(dim=-1, keepdim=True)


def tetrahedron(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The 4 vertices of a regular tetrahedron on S^2 (a spherical 2-design: its first moment is 0, its
    second I / 3, as for the uniform law)."""
    v = torch.tensor([[1.0, 1.0, 1.0], [1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]], dtype=dtype)
    return v / math.sqrt(3.0)


def vmf_sample(mu: torch.Tensor, kappa: float, *, generator: torch.Generator | None = None) -> torch.Tensor:
    r"""One von Mises-Fisher draw on S^2 per row of ``mu`` ``(n, 3)`` (unit vectors), concentration ``kappa``.

    Exact inverse-CDF sampler for d = 3: :math:`w = 1 + \log(u + (1-u)e^{-2\kappa})/\kappa` is the cosine
    to the mean (density :math:`\propto e^{\kappa w}` on [-1, 1]), the azimuth is uniform; so
    :math:`E[w] = \coth\kappa - 1/\kappa`.
    """
    if not isinstance(mu, torch.Tensor) or mu.ndim != 2 or mu.shape[1] != 3:
        raise ValueError(f"mu: expected a tensor (n, 3), got {getattr(mu, 'shape', mu)}")
    if not torch.allclose(mu.norm(dim=-1), torch.ones((), dtype=mu.dtype), atol=1e-6):
        raise ValueError("mu: rows must be unit vectors")
    kappa = check_positive("kappa", kappa)
    n = mu.shape[0]
    u = torch.rand(n, dtype=mu.dtype, generator=generator)
    w = 1.0 + torch.log(u + (1.0 - u) * math.exp(-2.0 * kappa)) / kappa
    w = w.clamp(-1.0, 1.0)
    # a tangent direction: uniform unit vector orthogonal to mu
    z = torch.randn(n, 3, dtype=mu.dtype, generator=generator)
    z = z - (z * mu).sum(-1, keepdim=True) * mu
    z = z / z.norm(dim=-1, keepdim=True)
    return w.unsqueeze(-1) * mu + torch.sqrt((1.0 - w * w).clamp_min(0.0)).unsqueeze(-1) * z


def vmf_mixture(
    centres: torch.Tensor, kappa: float, n: int, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``n`` points from the equal-weight mixture of vMF(``centres[k]``, ``kappa``) on S^2."""
    if not isinstance(centres, torch.Tensor) or centres.ndim != 2 or centres.shape[1] != 3:
        raise ValueError(f"centres: expected a tensor (k, 3), got {getattr(centres, 'shape', centres)}")
    n = check_int("n", n, minimum=1)
    comp = torch.randint(0, centres.shape[0], (n,), generator=generator)
    return vmf_sample(centres[comp], kappa, generator=generator)


def latlon_jsd(x: Any, y: Any, *, bins: tuple[int, int] = (36, 18)) -> float:
    """Jensen-Shannon divergence (natural log, in [0, ln 2]) of the lon x lat histograms of two S^2 samples.

    The square of :func:`scipy.spatial.distance.jensenshannon` (which returns the distance), as the spec says;
    ``bins`` = (longitude bins over [-pi, pi], latitude bins over [-pi/2, pi/2]).
    """
    import numpy as np
    from scipy.spatial.distance import jensenshannon

    def hist(p: Any) -> Any:
        p = np.asarray(p.detach().cpu() if isinstance(p, torch.Tensor) else p, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 1:
            raise ValueError(f"x, y: expected arrays (n >= 1, 3), got {p.shape}")
        if not np.isfinite(p).all():
            raise ValueError("x, y: non-finite points")
        p = p / np.linalg.norm(p, axis=1, keepdims=True)
        lon = np.arctan2(p[:, 1], p[:, 0])
        lat = np.arcsin(np.clip(p[:, 2], -1.0, 1.0))
        h, _, _ = np.histogram2d(lon, lat, bins=bins, range=[[-np.pi, np.pi], [-np.pi / 2, np.pi / 2]])
        return h.ravel() / h.sum()

    return float(jensenshannon(hist(x), hist(y)) ** 2)


class PeakTensorMemory:
    """Context manager measuring the peak bytes of tensor storage allocated inside the block (CPU or any
    device).

    A :class:`torch.utils._python_dispatch.TorchDispatchMode` sees every aten op (autograd's backward ops
    included); each new output storage is counted until its (preserved) Python storage object is finalised,
    i.e. until the storage is freed. Storages that existed before the block, and views of them, are not
    counted: ``peak_bytes`` is the high-water mark of memory *allocated in the block* (tensor data only, not
    the allocator's slack or Python objects). ``tracemalloc`` cannot do this: torch's CPU allocator bypasses
    Python's allocator (a 40 MB tensor shows as 80 bytes there).
    """

    def __init__(self) -> None:
        self.current = 0
        self.peak_bytes = 0
        self._live: dict[int, int] = {}
        self._mode: Any = None

    def _free(self, key: int) -> None:
        self.current -= self._live.pop(key, 0)

    def _track(self, t: torch.Tensor, inputs: set[int]) -> None:
        st = t.untyped_storage()
        key = id(st)
        if key in self._live or key in inputs:
            return
        nb = int(st.nbytes())
        self._live[key] = nb
        self.current += nb
        self.peak_bytes = max(self.peak_bytes, self.current)
        weakref.finalize(st, self._free, key)

    def __enter__(self) -> PeakTensorMemory:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                out = func(*args, **(kwargs or {}))
                leaves = [a for a in tree_leaves((args, kwargs or {})) if isinstance(a, torch.Tensor)]
                inputs = {id(a.untyped_storage()) for a in leaves}
                for o in tree_leaves(out):
                    if isinstance(o, torch.Tensor):
                        tracker._track(o, inputs)
                return out

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)
        self._mode = None


def solver_cases() -> list[Any]:
    """The solver-conformance case of :meth:`LandingDiffusion.fit` (a tiny OLLA net on S^2 data)."""
    from optarium._core.solver import SolverCase

    def solve(
        *, dtype: torch.dtype, device: Any, seed: int, iters: int = 4, lr: float = 1e-3, **kw: Any
    ) -> Result:
        g = torch.Generator(device=device).manual_seed(seed)
        data = torch.randn(32, 3, dtype=dtype, device=device, generator=g)
        data = data / data.norm(dim=-1, keepdim=True)
        model = LandingDiffusion(sphere_constraints(), NoiseSchedule(0.05, 1.0, 1.0, 8), "OLLA", hidden=(16,))
        kw = {"batch_size": 16, "time_subsample": 2, "record_every": 1, **kw}
        return model.fit(data, iters=iters, lr=lr, generator=g, **kw)

    return [
        SolverCase(
            name="constrained-diffusion-landing:fit",
            solve=solve,
            statuses={"max_iter": {"iters": 4}, "timeout": {"iters": 10_000, "time_limit_s": 0.05}},
            max_iter=4,
            tolerance_holds=lambda r: True,
            optimality=lambda r: 0.0,
            optimality_tol=1.0,
            invalid=[({"iters": -1}, "iters"), ({"lr": 0.0}, "lr"), ({"batch_size": 0}, "batch_size")],
            stochastic=True,
            exempt={
                "converged": "training has no convergence tolerance; the loss decrease is tested in "
                "tests/generative/test_landing.py::test_loss_sanity",
                "optimality": "no known optimum of the path loss; see test_loss_sanity",
                "diverged": "the path loss of a bounded-data MLP does not blow up at a tested lr; "
                "non-finite losses are stopped by SolverLoop's finite-metric rule (generic to every solver)",
            },
        )
    ]
