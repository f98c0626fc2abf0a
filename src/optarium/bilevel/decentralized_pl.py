r"""Decentralized Hessian/Jacobian-free bilevel optimization with a Polyak-Łojasiewicz lower level.

Paper: "Convergence Analysis of Decentralized Hessian-/Jacobian-Free Algorithm for Nonconvex Stochastic
Bilevel Optimization", ICML 2026 poster 64280 (https://icml.cc/virtual/2026/poster/64280). Only the title and
abstract were found (no arXiv version, no code): the paper's algorithm is **reconstructed** from the abstract
(decentralized, first-order only, no lower-level regulariser, constant single-timescale steps, PL lower
level) and from its single-agent ancestor HJFBiO (Huang, "Optimal Hessian/Jacobian-Free Nonconvex-PL Bilevel
Optimization", ICML 2024), which replaces Hessian/Jacobian-vector products by finite differences of
gradients. The working name is D-HJFBiO.

Problem. ``n`` agents on a connected undirected graph with a doubly stochastic symmetric mixing matrix
:math:`W`; agent :math:`i` holds :math:`f_i, g_i`:

.. math::

    \min_x \Phi(x) = \tfrac1n\sum_i f_i(x, y^*(x)),\qquad y^*(x)\in\arg\min_y g(x, y),\quad
    g = \tfrac1n\sum_i g_i,

with :math:`g(x, \cdot)` possibly nonconvex but PL.

Algorithm A (:func:`dhjf_bilevel`, the method; the spec's design). Local :math:`x_i, y_i, v_i` (:math:`v`
tracks :math:`(\nabla^2_{yy}g)^{-1}\nabla_y f`), trackers :math:`p_i, q_i, r_i`. Per iteration, with one
sample :math:`\xi_i^k` per agent shared by the paired calls and :math:`\delta_i = \delta/\max(1, \|v_i\|)`:

.. math::

    a_i &= \nabla_y g_i(x_i, y_i;\xi),\quad
    H_iv_i &\approx \frac{\nabla_y g_i(x_i, y_i+\delta_i v_i;\xi)
    - \nabla_y g_i(x_i, y_i-\delta_i v_i;\xi)}{2\delta_i},\\
    J_iv_i &\approx \text{the same with } \nabla_x g_i,\\
    b_i &= H_iv_i + \kappa v_i - \nabla_y f_i(x_i, y_i;\xi),\qquad
    c_i = \nabla_x f_i(x_i, y_i;\xi) - J_iv_i,\\
    y_i &\leftarrow \textstyle\sum_j W_{ij}y_j - \beta p_i,\quad
    v_i \leftarrow \sum_j W_{ij}v_j - \eta q_i,\quad
    x_i \leftarrow \sum_j W_{ij}x_j - \alpha r_i,\\
    p_i &\leftarrow \textstyle\sum_j W_{ij}p_j + a_i^{k+1} - a_i^k
    \quad(\text{same for } q \text{ with } b,\ r \text{ with } c;\ p^0 = a^0, \dots),

constant steps :math:`\alpha, \beta, \eta` (single timescale, :math:`\alpha = c\beta`). All six vectors are
mixed with their current values, so **one** ``comm.gossip`` round per iteration carries
:math:`(x, y, v, p, q, r)` stacked. :math:`\kappa` (default 0) damps :math:`v` where :math:`\nabla^2_{yy}g`
is singular (under pure PL). ``tracking=False`` drops the trackers (directions used directly).

Stochastic oracle. Every gradient call is the problem's exact gradient plus additive Gaussian noise of std
:math:`\sigma/\sqrt b` (``noise_std``, ``batch_size``; :math:`b` independent draws averaged), drawn from
one seeded generator for all agents (each process keeps its rows, so results do not depend on the split).
The noise is a function of the sample :math:`\xi_i^k`, so the paired FD calls see the same noise
(common random numbers) and it cancels in the difference; with fresh noise per call the FD products would
carry noise :math:`\approx\sigma/(\sqrt2\delta)` and the method diverges (the spec's measurement).

Algorithm B (:func:`dpenalty_bilevel`; the spec's alternative, F2SA-type value-function penalty of Kwon et
al., ICLR 2024): :math:`L_\gamma = f + \gamma(g(x,y) - g(x,z))`; directions :math:`\nabla_y f + \gamma
\nabla_y g` at :math:`(x, y)`, :math:`\nabla_y g` at :math:`(x, z)`, :math:`\nabla_x f(x,y) + \gamma
(\nabla_x g(x,y) - \nabla_x g(x,z))`, each tracked, one gossip of :math:`(x, y, z, p_y, p_z, p_x)`.
**Deviation**: the :math:`y` step is ``lr_y / penalty`` (the curvature of the penalised :math:`y` problem
is :math:`\gamma` times that of :math:`g`; with the raw ``lr_y`` the iteration diverges for any useful
:math:`\gamma`). Its fixed point is :math:`x^*_\gamma`, :math:`O(1/\gamma)` away from :math:`x^*`.

Baseline D-SOBA (:func:`dsoba_bilevel`, **reconstructed** from Kong et al., "Decentralized Bilevel
Optimization: A Perspective from Transient Iteration Complexity", JMLR 2025): exact second-order products
(forward-mode ``torch.func.jvp`` of the gradient oracles), no gradient tracking, a moving average
:math:`h_i \leftarrow (1-\theta)h_i + \theta c_i` of the hypergradient (``momentum`` :math:`\theta`), one
gossip of :math:`(x, y, v)` per iteration. The centralised single-agent method on pooled data is Algorithm A
with ``Communicator.local(1)`` and ``W = [[1]]`` on the pooled problem (:meth:`PLSinBilevel.pooled`).

Not built (searched 2026-12-02 for issue 18: stored web pages, docs, code and issues; no paper body, no
algorithm box, no code of either paper was reachable, so neither update rule could be written down and
neither is implemented; a baseline guessed from an abstract would not be the paper's):

- **DUET**: Qin, Liu, Lu, Liang & Liu, "DUET: Decentralized Bilevel Optimization without Lower-Level Strong
  Convexity", ICLR 2025, arXiv:2606.21153. Found only the abstract and the OpenReview reviews: a
  single-loop method with gradient tracking that adds a *diminishing* quadratic regulariser
  :math:`\mu_t` to each agent's *own* lower-level objective (local LL problems, not the averaged
  :math:`g`), a multiplier :math:`v_{i,t}` approximating the solution of the regularised linear system,
  projections with radii :math:`r_y^t, r_v^t`, an LL step schedule with exponent :math:`p` and averaging
  :math:`\tau`; analysed for a convex (not strongly convex) LL in the *deterministic* setting, rate
  :math:`O(1/T^{1-5p-11\tau/4})` to an approximate-KKT point. The schedules and the exact updates of
  its Algorithm 1 are not in those texts.
- **gossip DSBO**: Yang, Zhang & Wang, "Decentralized Gossip-Based Stochastic Bilevel Optimization over
  Communication Networks", NeurIPS 2022 (pp. 238-252), arXiv:2206.10870. Found the abstract, a summary and
  a reproducibility report (method = its Algorithm 2; code promised, never released): single timescale,
  gossip of local gradient *and Hessian/Jacobian* estimates, several independent inverse-Hessian
  estimators per agent aggregated by consensus and stochastic approximation; strongly convex LL;
  :math:`O(1/(K\epsilon^2))` (nonconvex) and :math:`O(1/(K\epsilon))` (PL UL) per-agent samples. The
  HVP/JVP-only variant is Chen, Huang, Ma & Balasubramanian, ICML 2023, arXiv:2210.12839 (its algorithm
  section was not reachable either).
- MA-DSBO (Chen et al. 2023) and SUN-DSBO were not searched beyond the spec's list.

SPMD: written once against :class:`optarium.distributed.comm.Communicator`; every agent's rows stacked on a
leading axis, monitoring inside ``comm.stats.paused()``. :func:`spmd_solve` is the entry point for
:func:`optarium.distributed.launch`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_nonnegative, check_positive

__all__ = [
    "METHODS",
    "DecentralizedBilevelProblem",
    "PLSinBilevel",
    "decentralized_bilevel",
    "dhjf_bilevel",
    "dpenalty_bilevel",
    "dsoba_bilevel",
    "fd_products",
    "make_pl_sin_bilevel",
    "solver_cases",
    "spmd_solve",
]

METHODS = ("dhjf", "penalty", "dsoba")


@runtime_checkable
class DecentralizedBilevelProblem(Protocol):
    """What the decentralized bilevel solvers call: batched exact gradients of every agent's ``f_i, g_i``.

    Each oracle takes ``X (n_local, dim_x)``, ``Y (n_local, dim_y)`` and ``agents`` (the global indices of
    the rows, a ``range``) and returns the rows of the agents' gradients. Optional: ``phi(x)`` and
    ``phi_grad(x)`` (the true :math:`\\Phi`, for monitoring), ``x_star()`` (the solution), ``noise_std``.
    """

    n_agents: int
    dim_x: int
    dim_y: int

    def grad_x_f(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor: ...

    def grad_y_f(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor: ...

    def grad_x_g(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor: ...

    def grad_y_g(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor: ...

    def upper_value(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor: ...


def _phi_prime(u: torch.Tensor) -> torch.Tensor:
    return 2.0 * u + 3.0 * torch.sin(2.0 * u)


@dataclass(frozen=True)
class PLSinBilevel:
    r"""The spec's synthetic instance: nonconvex-PL lower level with a closed-form solution.

    :math:`g_i(x, y) = \sum_j w_{ij}\,\varphi(y_j - a_j^\top x)`, :math:`\varphi(u) = u^2 + 3\sin^2 u` (PL,
    nonconvex for :math:`|u| > 0.955`), :math:`\sum_i w_{ij} = n`, so :math:`g = \sum_j \varphi(y_j -
    a_j^\top x)` and :math:`y^*(x) = Ax`; :math:`f_i(x, y) = \tfrac12\|y - c\|^2 + \tfrac\lambda2\|x\|^2`, so
    :math:`\Phi(x) = \tfrac12\|Ax - c\|^2 + \tfrac\lambda2\|x\|^2` and :math:`x^* = (A^\top A + \lambda
    I)^{-1}A^\top c`.

    Attributes: ``A (m, dim_x)``, ``c (m,)``, ``weights (n, m)`` (agent shares), ``lam``, ``noise_std``.
    """

    A: torch.Tensor
    c: torch.Tensor
    weights: torch.Tensor
    lam: float = 0.1
    noise_std: float = 0.0

    def __post_init__(self) -> None:
        for name in ("A", "c", "weights"):
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                raise TypeError(f"{name}: must be a floating tensor")
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"{name}: has non-finite entries")
        m = self.A.shape[0]
        if self.A.dim() != 2 or tuple(self.c.shape) != (m,):
            raise ValueError(f"c: expected shape ({m},), got {tuple(self.c.shape)}")
        if self.weights.dim() != 2 or self.weights.shape[1] != m:
            raise ValueError(f"weights: expected shape (n, {m}), got {tuple(self.weights.shape)}")
        if bool((self.weights < 0).any()):
            raise ValueError("weights: must be nonnegative")
        check_nonnegative("lam", self.lam)
        check_nonnegative("noise_std", self.noise_std)

    @property
    def n_agents(self) -> int:
        """Number of agents."""
        return int(self.weights.shape[0])

    @property
    def dim_x(self) -> int:
        """Upper-level dimension."""
        return int(self.A.shape[1])

    @property
    def dim_y(self) -> int:
        """Lower-level dimension (``m``)."""
        return int(self.A.shape[0])

    def _w(self, agents: range, like: torch.Tensor) -> torch.Tensor:
        return self.weights[agents.start : agents.stop].to(dtype=like.dtype, device=like.device)

    def grad_g(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> tuple[torch.Tensor, torch.Tensor]:
        """``(∇_x g_i, ∇_y g_i)`` rows (one shared residual)."""
        A = self.A.to(dtype=X.dtype, device=X.device)
        gy = self._w(agents, X) * _phi_prime(Y - X @ A.T)
        return -gy @ A, gy

    def grad_x_g(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor:
        """:math:`\\nabla_x g_i = -A^\\top(w_i \\odot \\varphi'(y - Ax))` rows."""
        return self.grad_g(X, Y, agents)[0]

    def grad_y_g(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor:
        """:math:`\\nabla_y g_i = w_i \\odot \\varphi'(y - Ax)` rows."""
        return self.grad_g(X, Y, agents)[1]

    def products(
        self, X: torch.Tensor, Y: torch.Tensor, V: torch.Tensor, agents: range
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact ``(∇²_xy g_i v, ∇²_yy g_i v)`` rows: :math:`Hv = w \\odot \\varphi''(u) \\odot v`,
        :math:`Jv = -A^\\top Hv`."""
        A = self.A.to(dtype=X.dtype, device=X.device)
        u = Y - X @ A.T
        hv = self._w(agents, X) * (2.0 + 6.0 * torch.cos(2.0 * u)) * V
        return -hv @ A, hv

    def grad_x_f(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor:
        """:math:`\\lambda x` rows."""
        return self.lam * X

    def grad_y_f(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor:
        """:math:`y - c` rows."""
        return Y - self.c.to(dtype=Y.dtype, device=Y.device)

    def upper_value(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor:
        """Per-agent :math:`f_i(x_i, y_i)`."""
        c = self.c.to(dtype=Y.dtype, device=Y.device)
        return 0.5 * (Y - c).pow(2).sum(-1) + 0.5 * self.lam * X.pow(2).sum(-1)

    def lower_value(self, X: torch.Tensor, Y: torch.Tensor, agents: range) -> torch.Tensor:
        """Per-agent :math:`g_i(x_i, y_i)`."""
        A = self.A.to(dtype=X.dtype, device=X.device)
        u = Y - X @ A.T
        return (self._w(agents, X) * (u.pow(2) + 3.0 * torch.sin(u).pow(2))).sum(-1)

    def phi(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\Phi(x)`."""
        A, c = self.A.to(dtype=x.dtype, device=x.device), self.c.to(dtype=x.dtype, device=x.device)
        return 0.5 * (A @ x - c).pow(2).sum() + 0.5 * self.lam * x.pow(2).sum()

    def phi_grad(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\nabla\\Phi(x) = A^\\top(Ax - c) + \\lambda x`."""
        A, c = self.A.to(dtype=x.dtype, device=x.device), self.c.to(dtype=x.dtype, device=x.device)
        return A.T @ (A @ x - c) + self.lam * x

    def x_star(self) -> torch.Tensor:
        """The closed-form solution :math:`(A^\\top A + \\lambda I)^{-1}A^\\top c`."""
        A = self.A
        return torch.linalg.solve(A.T @ A + self.lam * torch.eye(self.dim_x, dtype=A.dtype), A.T @ self.c)

    def local_smoothness(self) -> float:
        """:math:`\\max_i \\mathrm{Lip}(\\nabla_y g_i) = 8\\max_{ij} w_{ij}` (:math:`|\\varphi''|\\le 8`)."""
        return 8.0 * float(self.weights.max())

    def pooled(self) -> PLSinBilevel:
        """The single-agent problem on pooled data (:math:`g = \\frac1n\\sum_i g_i`, one agent)."""
        w = self.weights.mean(0, keepdim=True)
        return dataclasses.replace(self, weights=w)

    def to(self, *, dtype: torch.dtype | None = None, device: Any = None) -> PLSinBilevel:
        """The same problem in ``dtype`` on ``device``."""
        return dataclasses.replace(
            self,
            A=self.A.to(dtype=dtype, device=device),
            c=self.c.to(dtype=dtype, device=device),
            weights=self.weights.to(dtype=dtype, device=device),
        )


def make_pl_sin_bilevel(
    n_agents: int = 8,
    *,
    dim_x: int = 10,
    m: int = 20,
    lam: float = 0.1,
    concentration: float = 5.0,
    noise_std: float = 0.05,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> PLSinBilevel:
    """The spec's instance: ``A ~ N(0, 1/m)``, ``c ~ N(0, I)``, shares ``n * Dirichlet(concentration)``."""
    n_agents = check_int("n_agents", n_agents, minimum=1)
    dim_x, m = check_int("dim_x", dim_x, minimum=1), check_int("m", m, minimum=1)
    concentration = check_positive("concentration", concentration)
    g = torch.Generator().manual_seed(int(seed))
    A = torch.randn(m, dim_x, generator=g, dtype=torch.float64) / math.sqrt(m)
    c = torch.randn(m, generator=g, dtype=torch.float64)
    gam = torch._standard_gamma(torch.full((m, n_agents), float(concentration), dtype=torch.float64), g)
    weights = (n_agents * gam / gam.sum(1, keepdim=True)).T.contiguous()
    return PLSinBilevel(A, c, weights, lam=float(lam), noise_std=float(noise_std)).to(dtype=dtype)


# ------------------------------------------------------------------------------------------------ oracles


def _grad_g(
    problem: Any, X: torch.Tensor, Y: torch.Tensor, agents: range
) -> tuple[torch.Tensor, torch.Tensor]:
    fn = getattr(problem, "grad_g", None)
    if fn is not None:
        return fn(X, Y, agents)
    return problem.grad_x_g(X, Y, agents), problem.grad_y_g(X, Y, agents)


def fd_products(
    problem: Any, X: torch.Tensor, Y: torch.Tensor, V: torch.Tensor, agents: range, fd_eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Central finite differences ``(J v, H v)`` of :math:`\nabla_x g_i, \nabla_y g_i` along ``v`` per row.

    :math:`Hv \approx [\nabla_y g(x, y + \delta v) - \nabla_y g(x, y - \delta v)] / 2\delta` with
    :math:`\delta = \text{fd\_eps} / \max(1, \|v_i\|)` per row; :math:`Jv` (:math:`\nabla^2_{xy}g\,v`) alike.
    """
    d = fd_eps / V.norm(dim=1, keepdim=True).clamp_min(1.0)
    gxp, gyp = _grad_g(problem, X, Y + d * V, agents)
    gxm, gym = _grad_g(problem, X, Y - d * V, agents)
    return (gxp - gxm) / (2 * d), (gyp - gym) / (2 * d)


def _exact_products(
    problem: Any, X: torch.Tensor, Y: torch.Tensor, V: torch.Tensor, agents: range
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact ``(J v, H v)``: the problem's ``products`` if it has one, else forward mode of the oracles."""
    fn = getattr(problem, "products", None)
    if fn is not None:
        return fn(X, Y, V, agents)
    _, (jv, hv) = torch.func.jvp(lambda y: _grad_g(problem, X, y, agents), (Y,), (V,))
    return jv, hv


# ------------------------------------------------------------------------------------------------ solver


def _rows(name: str, t: Any, n: int, d: int, like: torch.Tensor | None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: must be a tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name}: must be floating point, got {t.dtype}")
    if t.dim() == 1 and t.shape[0] == d:
        t = t.expand(n, d)
    if tuple(t.shape) != (n, d):
        raise ValueError(f"{name}: expected shape ({d},) or ({n}, {d}), got {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: has non-finite entries")
    if like is not None:
        t = t.to(dtype=like.dtype, device=like.device)
    return t.clone()


def decentralized_bilevel(
    problem: Any,
    comm: Any,
    W: torch.Tensor,
    x0: torch.Tensor,
    y0: torch.Tensor,
    *,
    method: str = "dhjf",
    steps: int = 1000,
    lr_x: float = 0.004,
    lr_y: float = 0.01,
    lr_v: float | None = None,
    fd_eps: float = 1e-3,
    noise_std: float | None = None,
    batch_size: int = 1,
    tracking: bool = True,
    damping: float = 0.0,
    penalty: float = 20.0,
    momentum: float = 0.5,
    seed: int = 0,
    tol: float | None = None,
    record_every: int = 10,
    time_limit_s: float | None = None,
) -> Result:
    r"""Run ``method`` (:data:`METHODS`) on this rank's agents; see the module docstring for the updates.

    Args:
        problem: a :class:`DecentralizedBilevelProblem` (every agent's oracles; this rank uses its rows).
        comm: this process's :class:`~optarium.distributed.comm.Communicator` (``Communicator.local(n)``).
        W: the ``(n, n)`` mixing matrix (validated by
            :func:`~optarium.distributed.topology.check_mixing_matrix`).
        x0, y0: starting points, ``(dim,)`` (every agent) or ``(n, dim)`` (one row per agent).
        method: ``"dhjf"`` (Algorithm A), ``"penalty"`` (Algorithm B) or ``"dsoba"`` (D-SOBA).
        steps: iterations (one gossip round each).
        lr_x, lr_y, lr_v: constant steps :math:`\alpha, \beta, \eta` (``lr_v`` defaults to ``lr_y``).
        fd_eps: finite-difference :math:`\delta` (``dhjf``).
        noise_std: gradient-noise std (default ``problem.noise_std``, else 0); ``batch_size`` b divides it
            by :math:`\sqrt b`.
        tracking: gradient tracking on the directions (``dhjf``, ``penalty``).
        damping: :math:`\kappa` of the damped ``v`` update (``dhjf``, ``dsoba``).
        penalty: :math:`\gamma` of ``penalty``; momentum: :math:`\theta` of ``dsoba``.
        seed: the noise stream (one generator for all agents).
        tol: ``converged`` once consensus :math:`\frac1n\sum_i\|x_i - \bar x\|^2 \le` tol and the relative
            change of :math:`\bar x` since the previous record is :math:`\le` tol (metric ``stall``).
        record_every: history period (the ``stall`` lag); time_limit_s: solver-seconds budget.

    Returns:
        :class:`~optarium._core.result.Result` with ``x`` = :math:`\bar x`, ``value`` = :math:`\Phi(\bar x)`
        (or the mean upper value), history (objective, consensus, y_consensus, rel_err and
        hypergrad_norm_sq where the problem knows them, stall, gossip_rounds, bytes) and ``extras``: this
        rank's ``X``, ``Y``, ``V`` blocks (``V`` is ``z`` for ``penalty``), the communication statistics.
    """
    from optarium.distributed.rounds import rank_agreement
    from optarium.distributed.topology import check_mixing_matrix

    check_choice("method", method, METHODS)
    for name in ("n_agents", "dim_x", "dim_y", "grad_x_f", "grad_y_f", "upper_value"):
        if not hasattr(problem, name):
            raise TypeError(f"problem: must be a DecentralizedBilevelProblem (missing {name!r})")
    n, dx, dy = int(problem.n_agents), int(problem.dim_x), int(problem.dim_y)
    if int(comm.n_clients) != n:
        raise ValueError(f"comm: has {comm.n_clients} clients, the problem {n} agents")
    if not isinstance(W, torch.Tensor):
        raise TypeError(f"W: must be a tensor, got {type(W).__name__}")
    if not W.is_floating_point():
        raise TypeError(f"W: must be floating point, got {W.dtype}")
    atol = max(1e-8, 16 * torch.finfo(W.dtype).eps)  # a float32 W is doubly stochastic to its rounding
    check_mixing_matrix(W.detach().to("cpu", torch.float64), n, atol=atol)
    steps = check_int("steps", steps, minimum=0)
    lr_x, lr_y = check_positive("lr_x", lr_x), check_positive("lr_y", lr_y)
    lr_v = lr_y if lr_v is None else check_positive("lr_v", lr_v)
    fd_eps = check_positive("fd_eps", fd_eps)
    sigma = float(getattr(problem, "noise_std", 0.0)) if noise_std is None else noise_std
    sigma = check_nonnegative("noise_std", sigma)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    damping = check_nonnegative("damping", damping)
    penalty = check_positive("penalty", penalty)
    momentum = check_positive("momentum", momentum)
    if momentum > 1:
        raise ValueError(f"momentum: must be in (0, 1], got {momentum}")
    record_every = check_int("record_every", record_every, minimum=1)
    if tol is not None:
        tol = check_positive("tol", tol)
    if not isinstance(tracking, bool):
        raise TypeError(f"tracking: must be a bool, got {type(tracking).__name__}")
    agents = comm.local_clients
    sl = slice(agents.start, agents.stop)
    X = _rows("x0", x0, n, dx, None)
    like = X
    Y = _rows("y0", y0, n, dy, like)
    X, Y = X[sl].contiguous(), Y[sl].contiguous()
    Wt = W.to(dtype=like.dtype, device=like.device)
    std = sigma / math.sqrt(batch_size)
    gen = torch.Generator(device=like.device).manual_seed(int(seed))
    dn = 2 * (dx + dy)

    def noise() -> tuple[torch.Tensor, ...]:
        """This rank's rows of one draw for all agents: (ξ_fx, ξ_fy, ξ_gx, ξ_gy)."""
        if std == 0.0:
            z = like.new_zeros((len(agents), dn))
        else:
            z = std * torch.randn((n, dn), generator=gen, dtype=like.dtype, device=like.device)[sl]
        return torch.split(z, (dx, dy, dx, dy), dim=1)

    def directions(X: torch.Tensor, Y: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """The stacked local directions ``[a | b | c]`` (``dhjf``/``dsoba``) or ``[py | pz | px]``."""
        nfx, nfy, _, ngy = noise()  # ξ_gx cancels wherever ∇_x g enters (FD pairs, penalty difference)
        fx = problem.grad_x_f(X, Y, agents) + nfx
        fy = problem.grad_y_f(X, Y, agents) + nfy
        gx, gy = _grad_g(problem, X, Y, agents)
        if method == "penalty":
            gxz, gyz = _grad_g(problem, X, V, agents)
            dy_ = fy + penalty * (gy + ngy)
            dz_ = gyz + ngy
            dx_ = fx + penalty * (gx - gxz)  # the shared sample's noise cancels in the difference
            return torch.cat([dy_, dz_, dx_], 1)
        if method == "dhjf":
            jv, hv = fd_products(problem, X, Y, V, agents, fd_eps)
        else:
            jv, hv = _exact_products(problem, X, Y, V, agents)
        b = hv + damping * V - fy
        c = fx - jv
        return torch.cat([gy + ngy, b, c], 1)

    V = torch.zeros_like(Y) if method != "penalty" else Y.clone()
    stats = comm.stats
    r0 = stats.uplink_rounds
    b0 = (stats.uplink_bits + stats.downlink_bits).clone()
    has_phi = hasattr(problem, "phi")
    has_grad = hasattr(problem, "phi_grad")
    xs = problem.x_star().to(dtype=like.dtype, device=like.device) if hasattr(problem, "x_star") else None
    state: dict[str, Any] = {"X": X, "Y": Y, "V": V, "prev": None}

    def xbar_of(X: torch.Tensor) -> torch.Tensor:
        with stats.paused():
            return comm.client_mean(X)

    def evaluate(k: int) -> dict[str, float]:
        X, Y = state["X"], state["Y"]
        with stats.paused():
            xb = comm.client_mean(X)
            yb = comm.client_mean(Y)
            cons = comm.client_mean((X - xb).pow(2).sum(1, keepdim=True))
            ycons = comm.client_mean((Y - yb).pow(2).sum(1, keepdim=True))
            bits = comm.client_mean(
                (stats.uplink_bits + stats.downlink_bits - b0).to(like.dtype).unsqueeze(1)
            )
            fval = None if has_phi else comm.client_mean(problem.upper_value(X, Y, agents).unsqueeze(1))
        xn = float(xb.norm())
        prev = state["prev"]
        change = math.inf if prev is None else float((xb - prev).norm()) / max(xn, 1e-300)
        state["prev"] = xb
        c = float(cons[0])
        row = {
            "objective": float(problem.phi(xb)) if has_phi else float(fval[0]),
            "consensus": c,
            "y_consensus": float(ycons[0]),
            "stall": max(c, change),
            "gossip_rounds": float(stats.uplink_rounds - r0),
            "bytes": float(bits[0]) / 8.0,
        }
        if has_grad:
            row["hypergrad_norm_sq"] = float(problem.phi_grad(xb).pow(2).sum())
        if xs is not None:
            row["rel_err"] = float((xb - xs).norm()) / max(float(xs.norm()), 1e-300)
        return row

    watch = ("objective", "consensus", "y_consensus", "rel_err", "hypergrad_norm_sq")
    loop = SolverLoop(
        steps,
        tol=tol,
        criterion="stall",
        record_every=record_every,
        time_limit_s=time_limit_s,
        objective="objective",
        blowup=1e12,
        blowup_floor=1.0,
        watch=watch,
        agree=rank_agreement(comm, like),
    )
    D = directions(X, Y, V)
    T = D.clone()  # trackers (p | q | r)
    H = D.clone()  # D-SOBA's moving average (only its x block is used)
    sy, sv = slice(0, dy), slice(dy, 2 * dy)
    sx = slice(2 * dy, 2 * dy + dx)
    lr_y_eff = lr_y / penalty if method == "penalty" else lr_y
    lr_v_eff = lr_y if method == "penalty" else lr_v
    for _ in loop.iterate(evaluate):
        if method == "dsoba":
            M = comm.gossip(torch.cat([X, Y, V], 1), Wt)
            MX, MY, MV = M[:, :dx], M[:, dx : dx + dy], M[:, dx + dy :]
            H = (1 - momentum) * H + momentum * D
            X = MX - lr_x * H[:, sx]
            Y = MY - lr_y * D[:, sy]
            V = MV - lr_v * D[:, sv]
            D = directions(X, Y, V)
        else:
            S = T if tracking else D
            payload = torch.cat([X, Y, V, T], 1) if tracking else torch.cat([X, Y, V], 1)
            M = comm.gossip(payload, Wt)
            MX, MY, MV = M[:, :dx], M[:, dx : dx + dy], M[:, dx + dy : dx + 2 * dy]
            X = MX - lr_x * S[:, sx]
            Y = MY - lr_y_eff * S[:, sy]
            V = MV - lr_v_eff * S[:, sv]
            Dn = directions(X, Y, V)
            if tracking:
                T = M[:, dx + 2 * dy :] + Dn - D
            D = Dn
        state.update(X=X, Y=Y, V=V)
    xb = xbar_of(X)
    if has_phi:
        value = float(problem.phi(xb))
    else:
        with stats.paused():
            value = float(comm.client_mean(problem.upper_value(X, Y, agents).unsqueeze(1))[0])
    extras = {
        "X": X,
        "Y": Y,
        "V": V,
        "trackers": T,
        "directions": D,
        "method": method,
        "comm": stats.as_dict(),
    }
    return loop.result(xb, value=value, extras=extras)


def dhjf_bilevel(
    problem: Any, comm: Any, W: torch.Tensor, x0: torch.Tensor, y0: torch.Tensor, **kw: Any
) -> Result:
    """Algorithm A (D-HJFBiO, the method): :func:`decentralized_bilevel` with ``method="dhjf"``."""
    return decentralized_bilevel(problem, comm, W, x0, y0, method="dhjf", **kw)


def dpenalty_bilevel(
    problem: Any, comm: Any, W: torch.Tensor, x0: torch.Tensor, y0: torch.Tensor, **kw: Any
) -> Result:
    """Algorithm B (value-function penalty): :func:`decentralized_bilevel` with ``method="penalty"``."""
    return decentralized_bilevel(problem, comm, W, x0, y0, method="penalty", **kw)


def dsoba_bilevel(
    problem: Any, comm: Any, W: torch.Tensor, x0: torch.Tensor, y0: torch.Tensor, **kw: Any
) -> Result:
    """D-SOBA baseline (exact products, no tracking): :func:`decentralized_bilevel`, ``method="dsoba"``."""
    return decentralized_bilevel(problem, comm, W, x0, y0, method="dsoba", **kw)


def spmd_solve(
    comm: Any, jobs: Sequence[tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, Mapping[str, Any]]]
) -> list[Result]:
    """Run ``(problem, W, x0, y0, kwargs)`` jobs with :func:`decentralized_bilevel` on this rank (``launch``).

    Statistics are reset before each job; the ``X``/``Y``/``V``/``trackers`` blocks of each result's
    ``extras`` are replaced by every agent's rows (gathered without charging the statistics).
    """
    out = []
    for problem, W, x0, y0, kw in jobs:
        comm.stats.reset()
        res = decentralized_bilevel(problem, comm, W, x0, y0, **dict(kw))
        with comm.stats.paused():
            g = {k: comm.all_gather_clients(res.extras[k]) for k in ("X", "Y", "V", "trackers", "directions")}
        out.append(dataclasses.replace(res, extras={**res.extras, **g}))
    return out


# ------------------------------------------------------------------------------------------------ conformance


def solver_cases() -> list[SolverCase]:
    """Conformance case: D-HJFBiO on a 4-agent ring, small instance, noise-free (noisy for determinism)."""
    from optarium.distributed.comm import Communicator
    from optarium.distributed.topology import mixing_matrix

    ref = make_pl_sin_bilevel(4, dim_x=3, m=5, lam=1.0, noise_std=0.0, seed=1)
    xs = ref.x_star()
    W = mixing_matrix("ring", 4)

    def solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
        p = ref.to(dtype=dtype, device=device)
        kw: dict[str, Any] = {"steps": 40, "lr_x": 0.01, "lr_y": 0.02, "seed": seed, **overrides}
        Wm = kw.pop("W", W).to(dtype=dtype, device=device)
        x0 = kw.pop("x0", torch.zeros(3, dtype=dtype, device=device))
        y0 = torch.zeros(5, dtype=dtype, device=device)
        return decentralized_bilevel(p, Communicator.local(4), Wm, x0, y0, **kw)

    def dist(res: Result) -> float:
        x = torch.as_tensor(res.x).detach().to("cpu", torch.float64)
        return float((x - xs).norm() / xs.norm())

    return [
        SolverCase(
            name="decentralized-pl-bilevel",
            solve=solve,
            statuses={
                "converged": {"tol": 1e-10, "steps": 5000, "record_every": 100},
                "max_iter": {"steps": 7},
                "diverged": {"lr_y": 5.0, "lr_x": 2.0},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=7,
            tolerance_holds=lambda res: res.history.last("consensus") <= 1e-10,
            optimality=dist,
            optimality_tol=1e-8,
            invalid=[
                ({"method": "newton"}, "method"),
                ({"steps": -1}, "steps"),
                ({"lr_x": 0.0}, "lr_x"),
                ({"lr_y": -1.0}, "lr_y"),
                ({"fd_eps": 0.0}, "fd_eps"),
                ({"batch_size": 0}, "batch_size"),
                ({"tol": -1.0}, "tol"),
                ({"W": torch.eye(4, dtype=torch.float64) * 0.5}, "W"),
                ({"W": mixing_matrix("ring", 3)}, "W"),
                ({"x0": torch.zeros(4, dtype=torch.float64)}, "x0"),
                ({"record_every": 0}, "record_every"),
            ],
            determinism={"noise_std": 0.05},
            stochastic=True,
        )
    ]
