r"""Decentralized optimization with mixed affine constraints: APAPC with Chebyshev acceleration.

Paper: Demyan Yarmoshik, Nhat Trung Nguyen, Alexander Rogozin, Alexander Gasnikov, "Complexity of
Decentralized Optimization with Mixed Affine Constraints", ICML 2026 (OpenReview ``KS6RbZMt8L``;
arXiv:2602.04479, "Decentralized Optimization with Mixed Affine Constraints"). The machinery (APAPC on a
reformulated problem, Chebyshev acceleration of the operator and of the gossip matrix) is that of the
predecessor, Yarmoshik et al., "Decentralized Optimization with Coupled Constraints" (ICLR 2025,
arXiv:2407.02020); APAPC is Salim, Condat, Kovalev, Richtárik, "An Optimal Algorithm for Strongly Convex
Minimization under Affine Constraints" (AISTATS 2022).

Problem (``n`` nodes on a graph, node ``i`` owns its data and talks only to its neighbours):

.. math::

    \min_{x_1..x_n,\ \tilde x}\ \sum_i f_i(x_i, \tilde x)\quad\text{s.t.}\quad
    \sum_i (A_i x_i - b_i) = 0,\quad C_i x_i = c_i,\quad \tilde C_i \tilde x = \tilde c_i .

Here :math:`f_i(z) = \tfrac12 z^\top H_i z - h_i^\top z` on :math:`z = (x_i, \tilde x)` (the quadratic
instances of the paper's experiments; the solver only calls the batched gradient and objective).

Reformulation (**reconstructed** from the predecessor's construction; the mixed paper's own block
formulas were not read). Each node keeps a copy :math:`\tilde x_i` and an auxiliary :math:`y_i\in\mathbb
R^m`; with the gossip matrix :math:`W` (symmetric PSD, kernel = consensus, e.g. :math:`I - M` for a
Metropolis mixing matrix :math:`M`) every constraint becomes *local* and the whole set reads
:math:`Ku = b'` for :math:`u = (x, y, \tilde x)`, :math:`K = \mathrm{diag}(B_1, B_2)`:

.. math::

    A_i x_i + \gamma [(W'\otimes I_m) y]_i = b_i,\quad C_i x_i = c_i,\quad
    [(W'\otimes I)\tilde x]_i = 0,\quad \tilde C_i\tilde x_i = \tilde c_i ,

(range :math:`(W'\otimes I_m) = \{\sum_i z_i = 0\}` makes the first rows equivalent to the coupled
constraint). The objective is augmented, :math:`G(u) = \sum_i f_i(x_i,\tilde x_i) + \tfrac r2\|Ax +
\gamma(W'\otimes I)y - b\|^2`, with :math:`r = \mu_f/(2L_A)`, :math:`\gamma = \sqrt{(\mu_A + L_A)/\mu_{W'}}`,
:math:`\mu_G = \mu_f\min\{\tfrac12, \tfrac{\mu_A + L_A}{4L_A}\}`, :math:`L_G = \max\{L_f + \mu_f,
\mu_f\tfrac{\mu_A + L_A}{L_A}\tfrac{L_{W'}}{\mu_{W'}}\}` (found in the predecessor), where :math:`L_A =
\max_i\sigma_{\max}^2(A_i)` and :math:`\mu_A = \lambda^+_{\min}(\tfrac1n\sum_i A_iA_i^\top)`.

APAPC (found): with :math:`u_f = u = z = 0`,

.. math::

    u_g &= \tau u + (1-\tau)u_f,\quad g = \nabla G(u_g),\\
    u_{1/2} &= (u - \eta(g - a u_g + z))/(1 + \eta a),\quad
    z \leftarrow z + \theta\, \mathcal P\big(K^\top(K u_{1/2} - b')\big),\\
    u^+ &= (u - \eta(g - a u_g + z))/(1 + \eta a),\quad u_f \leftarrow u_g + \tfrac{2\tau}{2-\tau}(u^+ - u),
    \quad u \leftarrow u^+,

:math:`\tau = \min\{1, \tfrac12\sqrt{\kappa_K/\kappa_G}\}`, :math:`\eta = 1/(4\tau L_G)`,
:math:`\theta = 1/(\eta L_K)`, :math:`a = \mu_G`; the output is :math:`u_f`.

Chebyshev acceleration (found in the predecessor code): :math:`\mathcal P` is the Chebyshev polynomial of
degree :math:`\lceil\sqrt{\kappa}\rceil` evaluated by the least-squares recurrence
(:func:`chebyshev_apply`); it maps the nonzero spectrum into :math:`[11/15, 19/15]`, so
:math:`\mu_K = 11/15`, :math:`L_K = 19/15`. **Reconstructed**: since :math:`K = \mathrm{diag}(B_1, B_2)`,
one polynomial per block (:math:`B_1^\top B_1` on :math:`(x, y)`, :math:`B_2^\top B_2` on :math:`\tilde x`,
each of degree :math:`\lceil\sqrt{\kappa_{B_j}}\rceil`), run in lockstep so that both blocks share the
gossip rounds of one product (one stacked payload) while both are active. One polynomial over the union
spectrum would need :math:`\lceil\sqrt{\kappa_B}\rceil` with :math:`\kappa_B \approx 1300` against
:math:`\max_j\kappa_{B_j} \approx 400` on the quick problem (the scales of the blocks differ).
Inside :math:`K`, every product with :math:`W` is replaced by :math:`W' = P(W)`, the same recurrence on
:math:`W` itself. **Deviation (the spec's)**: the default degree
of :math:`P` is :math:`\lceil\sqrt\chi\rceil` with :math:`\chi = \lambda_{\max}(W)/\lambda^+_{\min}(W)`
(already enough to map the spectrum of :math:`W'` into :math:`[11/15, 19/15]`), and
:math:`\mu_{W'} = (11/15)^2`, :math:`L_{W'} = (19/15)^2`; ``w_degree="predecessor"`` uses the predecessor's
:math:`\lceil\chi\rceil` (:math:`\lceil\sqrt{\kappa_W}\rceil` with :math:`\kappa_W = \chi^2`). The nominal
bounds are used when the exact image of the spectrum lies inside them (always, in our checks); otherwise
the exact bounds.

Constants (a **reconstruction** of set-up we could not read): the spectral bounds of :math:`K^\top K`
(:math:`\kappa_B`) and of :math:`W` are computed at set-up from a dense eigendecomposition of the small
global operators on every rank (deterministic, so every rank gets the same numbers); the paper uses
analytic bounds from the same quantities.

Methods (``method=``):

- ``"apapc-cheb"`` (the paper's): both Chebyshev levels; per iteration :math:`2\deg(P)(n_c + 1)` gossip
  rounds (the gradient of the augmentation needs two :math:`W'` products, each :math:`K^\top K` product
  two), one gradient per node.
- ``"apapc"``: plain APAPC on the raw :math:`W` (4 gossip rounds per iteration, one gradient).
- ``"primal-dual"`` (**reconstructed** baseline, the spec's): the decentralized primal-dual gradient method
  on the raw :math:`K`, :math:`u \leftarrow u - \eta(\nabla G(u) + K^\top z)`, :math:`z \leftarrow z +
  \theta(Ku - b')` (simultaneous), :math:`\eta = 1/L_G`, :math:`\theta = \mu_G/L_K`; 2 gossip rounds per
  iteration (the augmentation's gradient shares the :math:`K^\top` product with the dual).
- ``"extra"``: EXTRA (Shi, Ling, Wu, Yin, SIAM J. Optim. 2015) for the consensus-only special case (no
  :math:`x_i`, no constraint rows): :math:`x^{k+2} = (I + M)x^{k+1} - \tilde M x^k - \alpha(\nabla f(x^{k+1})
  - \nabla f(x^k))`, :math:`M = I - W` (needs :math:`\lambda_{\max}(W) < 2`), :math:`\tilde M = (I+M)/2`,
  :math:`\alpha = \lambda_{\min}(\tilde M)/L_f` (half the theorem's bound); one gossip round per iteration.

Tracking-ADMM and DPMM (exact local solves) are in
:mod:`optarium.distributed.decentralized_affine_baselines`. Not built: Gradient Sliding for the nonsmooth
regime, the regularisation reduction for the smooth convex regime.

SPMD: every node's data is stacked on a leading axis; a process holds the nodes ``comm.local_clients``, all
local products are batched, every multiplication by :math:`W` is one ``comm.gossip`` round (several vectors
of one round go in one stacked payload), monitoring runs inside ``comm.stats.paused()``. :func:`spmd_solve`
is the entry point for :func:`optarium.distributed.launch`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_nonnegative, check_positive

__all__ = [
    "METHODS",
    "InfeasibleProblemError",
    "MixedAffineProblem",
    "MixedAffineSetup",
    "chebyshev_apply",
    "chebyshev_matrix",
    "check_gossip_matrix",
    "make_mixed_affine",
    "mixed_affine_setup",
    "solve_mixed_affine",
    "solver_cases",
    "spmd_solve",
]

METHODS = ("apapc-cheb", "apapc", "primal-dual", "extra")
#: The nominal image of the nonzero spectrum under the Chebyshev polynomials (predecessor code).
CHEB_LOW, CHEB_HIGH = 11.0 / 15.0, 19.0 / 15.0


class InfeasibleProblemError(ValueError):
    """The affine constraints have no common solution (found by the least-squares preflight check)."""


# ------------------------------------------------------------------------------------------------ problem


def _bmv(M: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Batched matrix-vector product ``(n, a, b) x (n, b) -> (n, a)``."""
    return torch.matmul(M, v.unsqueeze(-1)).squeeze(-1)


def _bmtv(M: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Batched transposed product ``(n, a, b)^T x (n, a) -> (n, b)``."""
    return torch.matmul(v.unsqueeze(-2), M).squeeze(-2)


@dataclass(frozen=True)
class MixedAffineProblem:
    r"""A mixed affine-constrained problem over ``n`` nodes, every node's data stacked on the leading axis.

    :math:`f_i(x_i, \tilde x) = \tfrac12 z^\top H_i z - h_i^\top z`, :math:`z = (x_i, \tilde x)`.

    Attributes:
        H: ``(n, d + dt, d + dt)`` symmetric positive definite Hessians; h: ``(n, d + dt)``.
        A: ``(n, m, d)``, b: ``(n, m)``: the coupled constraint :math:`\sum_i (A_i x_i - b_i) = 0`.
        C: ``(n, r, d)``, c: ``(n, r)``: local constraints :math:`C_i x_i = c_i`.
        Ct: ``(n, rt, dt)``, ct: ``(n, rt)``: node constraints on the global variable (zero rows allowed,
            for nodes with fewer rows).
    Any block may have a zero dimension (``m = 0``: no coupled constraint; ``d = 0``: no local variables).
    """

    H: torch.Tensor
    h: torch.Tensor
    A: torch.Tensor
    b: torch.Tensor
    C: torch.Tensor
    c: torch.Tensor
    Ct: torch.Tensor
    ct: torch.Tensor

    def __post_init__(self) -> None:
        for name in ("H", "h", "A", "b", "C", "c", "Ct", "ct"):
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name}: must be a tensor, got {type(t).__name__}")
            if not t.is_floating_point():
                raise TypeError(f"{name}: must be floating point, got {t.dtype}")
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"{name}: has non-finite entries")
        n = self.H.shape[0]
        if self.H.dim() != 3 or self.H.shape[1] != self.H.shape[2]:
            raise ValueError(f"H: must be (n, p, p), got {tuple(self.H.shape)}")
        p = self.H.shape[1]
        d, dt = self.A.shape[-1] if self.A.dim() == 3 else -1, self.Ct.shape[-1] if self.Ct.dim() == 3 else -1
        shapes = {
            "h": (n, p),
            "A": (n, self.A.shape[1] if self.A.dim() == 3 else -1, d),
            "b": (n, self.A.shape[1] if self.A.dim() == 3 else -1),
            "C": (n, self.C.shape[1] if self.C.dim() == 3 else -1, d),
            "c": (n, self.C.shape[1] if self.C.dim() == 3 else -1),
            "Ct": (n, self.Ct.shape[1] if self.Ct.dim() == 3 else -1, dt),
            "ct": (n, self.Ct.shape[1] if self.Ct.dim() == 3 else -1),
        }
        for name, shape in shapes.items():
            if tuple(getattr(self, name).shape) != shape or -1 in shape:
                raise ValueError(f"{name}: expected shape {shape}, got {tuple(getattr(self, name).shape)}")
        if d + dt != p:
            raise ValueError(f"H: size {p} must equal d + dt = {d} + {dt}")
        if not torch.allclose(self.H, self.H.transpose(1, 2), atol=1e-10, rtol=1e-8):
            raise ValueError("H: must be symmetric")

    # shapes
    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.H.shape[0])

    @property
    def d(self) -> int:
        """Dimension of each local variable :math:`x_i`."""
        return int(self.A.shape[2])

    @property
    def dt(self) -> int:
        """Dimension of the global variable :math:`\\tilde x`."""
        return int(self.Ct.shape[2])

    @property
    def m(self) -> int:
        """Rows of the coupled constraint."""
        return int(self.A.shape[1])

    @property
    def r(self) -> int:
        """Local constraint rows per node."""
        return int(self.C.shape[1])

    @property
    def rt(self) -> int:
        """Rows of the node constraints on the global variable, per node."""
        return int(self.Ct.shape[1])

    def _spectrum(self) -> torch.Tensor:
        return torch.linalg.eigvalsh(self.H.detach().to("cpu", torch.float64))

    @property
    def mu_f(self) -> float:
        """Strong convexity of the worst node (smallest Hessian eigenvalue)."""
        return float(self._spectrum().min())

    @property
    def L_f(self) -> float:
        """Smoothness of the worst node (largest Hessian eigenvalue)."""
        return float(self._spectrum().max())

    # oracle
    def grad(self, Z: torch.Tensor, clients: torch.Tensor | range) -> torch.Tensor:
        """Gradients ``(n_local, d + dt)`` of the nodes ``clients`` at the rows ``Z`` (one per node)."""
        sl = _rows(clients)
        return _bmv(self.H[sl], Z) - self.h[sl]

    def loss(self, Z: torch.Tensor, clients: torch.Tensor | range) -> torch.Tensor:
        """Per-node objective values ``(n_local,)``."""
        sl = _rows(clients)
        return 0.5 * (Z * _bmv(self.H[sl], Z)).sum(-1) - (self.h[sl] * Z).sum(-1)

    def to(self, *, dtype: torch.dtype | None = None, device: Any = None) -> MixedAffineProblem:
        """The same problem in ``dtype`` on ``device``."""
        kw = {f.name: getattr(self, f.name).to(dtype=dtype, device=device) for f in dataclasses.fields(self)}
        return MixedAffineProblem(**kw)

    # centralized ground truth
    def _global_constraints(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Dense rows ``E w = e`` of the original constraints on ``w = (x_1, ..., x_n, xt)`` (float64)."""
        A, C, Ct = (t.detach().to("cpu", torch.float64) for t in (self.A, self.C, self.Ct))
        b, c, ct = (t.detach().to("cpu", torch.float64) for t in (self.b, self.c, self.ct))
        n, d, dt = self.n, self.d, self.dt
        coupled = torch.cat([torch.cat(list(A), 1), torch.zeros(self.m, dt, dtype=A.dtype)], 1)
        local = torch.cat([torch.block_diag(*C), torch.zeros(n * self.r, dt, dtype=A.dtype)], 1)
        glob = torch.cat([torch.zeros(n * self.rt, n * d, dtype=A.dtype), Ct.reshape(n * self.rt, dt)], 1)
        E = torch.cat([coupled, local, glob], 0)
        e = torch.cat([b.sum(0), c.reshape(-1), ct.reshape(-1)])
        return E, e

    def feasibility_residual(self) -> float:
        """:math:`\\min_w \\|Ew - e\\|` of the original constraints (least squares; 0 when feasible)."""
        E, e = self._global_constraints()
        if E.shape[0] == 0:
            return 0.0
        w = torch.linalg.pinv(E, rtol=1e-12) @ e
        return float((E @ w - e).norm())

    def solution(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The exact solution ``(X* (n, d), xt* (dt,), f*)`` from the KKT system (null-space method, float64).

        Raises:
            InfeasibleProblemError: the constraints are inconsistent.
        """
        n, d, dt = self.n, self.d, self.dt
        E, e = self._global_constraints()
        H = self.H.detach().to("cpu", torch.float64)
        h = self.h.detach().to("cpu", torch.float64)
        N = n * d + dt
        Q = torch.zeros(N, N, dtype=torch.float64)
        q = torch.zeros(N, dtype=torch.float64)
        for i in range(n):  # set-up only: assembling the global Hessian of sum_i f_i
            idx = torch.cat([torch.arange(i * d, (i + 1) * d), torch.arange(n * d, N)])
            Q[idx[:, None], idx[None, :]] += H[i]
            q[idx] += h[i]
        scale = max(float(e.abs().max()) if e.numel() else 0.0, 1.0)
        if E.shape[0]:
            U, S, Vh = torch.linalg.svd(E)
            rank = int((S > 1e-10 * max(float(S.max()), 1e-300)).sum())
            w0 = Vh[:rank].T @ ((U[:, :rank].T @ e) / S[:rank])
            res = float((E @ w0 - e).norm())
            if res > 1e-8 * scale:
                raise InfeasibleProblemError(f"constraints: inconsistent (least-squares residual {res:.3g})")
            Nb = Vh[rank:].T
        else:
            w0 = torch.zeros(N, dtype=torch.float64)
            Nb = torch.eye(N, dtype=torch.float64)
        v = torch.linalg.solve(Nb.T @ Q @ Nb, Nb.T @ (q - Q @ w0)) if Nb.shape[1] else Nb.new_zeros(0)
        w = w0 + Nb @ v
        f = float(0.5 * w @ Q @ w - q @ w)
        like = self.H
        X = w[: n * d].reshape(n, d).to(dtype=like.dtype, device=like.device)
        xt = w[n * d :].to(dtype=like.dtype, device=like.device)
        return X, xt, f


def _rows(clients: torch.Tensor | range) -> Any:
    if isinstance(clients, range):
        return slice(clients.start, clients.stop)
    return clients


def make_mixed_affine(
    n: int = 8,
    *,
    d: int = 5,
    dt: int = 3,
    m: int = 4,
    r: int = 2,
    rt_nodes: Sequence[int] = (0, 1),
    kappa_f: float = 20.0,
    lam: float = 0.01,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> MixedAffineProblem:
    r"""The spec's random instance: :math:`f_i = \tfrac12\|M_i z - v_i\|^2 + \tfrac\lambda2\|z\|^2`.

    :math:`M_i = Q_1\mathrm{diag}(s)Q_2^\top` (``(d+dt) x (d+dt)``, random orthogonal :math:`Q`'s, :math:`s`
    log-spaced in :math:`[s_{\min}, 1]` with :math:`s_{\min}^2 = (1+\lambda)/\kappa_f - \lambda`), so
    :math:`L_f = 1 + \lambda`, :math:`\mu_f = s_{\min}^2 + \lambda` and :math:`\kappa_f` is exact. Constraint
    data are Gaussian and consistent by construction: a feasible point is drawn first, then ``b`` (with
    node offsets summing to zero), ``c``, ``ct``. One row of :math:`\tilde C` on each node of
    ``rt_nodes`` (zero rows elsewhere).
    """
    n = check_int("n", n, minimum=1)
    for name, v in (("d", d), ("dt", dt), ("m", m), ("r", r)):
        check_int(name, v, minimum=0)
    kappa_f = check_positive("kappa_f", kappa_f)
    lam = check_nonnegative("lam", lam)
    if kappa_f < 1:
        raise ValueError(f"kappa_f: must be >= 1, got {kappa_f}")
    s2 = (1 + lam) / kappa_f - lam
    if s2 <= 0:
        raise ValueError(f"kappa_f: {kappa_f} is not reachable with lam={lam} (needs kappa_f < (1+lam)/lam)")
    if r > d:
        raise ValueError(f"r: at most d={d} local rows, got {r}")
    gen = torch.Generator().manual_seed(int(seed))
    p = d + dt

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    s = torch.logspace(math.log10(math.sqrt(s2)), 0.0, p, dtype=torch.float64) if p > 1 else torch.ones(p)
    Q1, _ = torch.linalg.qr(randn(n, p, p))
    Q2, _ = torch.linalg.qr(randn(n, p, p))
    M = Q1 @ torch.diag_embed(s.expand(n, p)) @ Q2.transpose(1, 2)
    v = randn(n, p)
    H = M.transpose(1, 2) @ M + lam * torch.eye(p, dtype=torch.float64)
    H = 0.5 * (H + H.transpose(1, 2))
    h = _bmtv(M, v)
    x0, xt0 = randn(n, d), randn(dt)
    A = randn(n, m, d)
    off = randn(n, m)
    off = off - off.mean(0, keepdim=True)
    b = _bmv(A, x0) + off
    C = randn(n, r, d)
    c = _bmv(C, x0)
    rows = sorted({int(i) for i in rt_nodes})
    if any(i < 0 or i >= n for i in rows):
        raise ValueError(f"rt_nodes: node indices must lie in [0, {n}), got {list(rt_nodes)}")
    rt = 1 if rows and dt else 0
    Ct = torch.zeros(n, rt, dt, dtype=torch.float64)
    if rt:
        Ct[rows, 0] = randn(len(rows), dt)
    ct = _bmv(Ct, xt0.expand(n, dt).contiguous())
    prob = MixedAffineProblem(H=H, h=h, A=A, b=b, C=C, c=c, Ct=Ct, ct=ct)
    return prob.to(dtype=dtype) if dtype != torch.float64 else prob


# ------------------------------------------------------------------------------------------------ Chebyshev


def chebyshev_apply(
    residual: Callable[[torch.Tensor], torch.Tensor], v0: torch.Tensor, mu: float, L: float, degree: int
) -> torch.Tensor:
    r"""``v0 - v_n`` after ``degree`` Chebyshev steps on an affine residual map: :math:`P(S)(v_0 - v^*)`.

    For a residual :math:`r(v) = S v - s` with the nonzero spectrum of :math:`S` in :math:`[\mu, L]`, the
    result is :math:`p(S)(v_0 - v^*)` with :math:`p(\lambda) = 1 - T_n(\tfrac{L+\mu-2\lambda}{L-\mu}) /
    T_n(\tfrac{L+\mu}{L-\mu})` (so :math:`p(0) = 0`, and with :math:`n \ge \sqrt{L/\mu}` the image of
    :math:`[\mu, L]` lies in :math:`[11/15, 19/15]`). Recurrence (predecessor code): :math:`\rho =
    (L-\mu)^2/16`, :math:`\nu = (L+\mu)/2`, :math:`\delta = -\nu/2`, :math:`p = -r(v_0)/\nu`,
    :math:`v_1 = v_0 + p`; then :math:`\beta = \rho/\delta`, :math:`\delta \leftarrow -(\nu+\beta)`,
    :math:`p \leftarrow (r(v) + \beta p)/\delta`, :math:`v \leftarrow v + p`. Calls ``residual``
    ``degree`` times.
    """
    degree = check_int("degree", degree, minimum=1)
    rho = (L - mu) ** 2 / 16.0
    nu = (L + mu) / 2.0
    delta = -nu / 2.0
    p = -residual(v0) / nu
    v = v0 + p
    for _ in range(degree - 1):
        beta = rho / delta
        delta = -(nu + beta)
        p = (residual(v) + beta * p) / delta
        v = v + p
    return v0 - v


def chebyshev_matrix(S: torch.Tensor, mu: float, L: float, degree: int) -> torch.Tensor:
    """The dense matrix :math:`p(S)` of :func:`chebyshev_apply` (set-up and tests)."""
    eye = torch.eye(S.shape[0], dtype=S.dtype, device=S.device)
    return chebyshev_apply(lambda V: S @ V, eye, mu, L, degree)


def check_gossip_matrix(W: torch.Tensor, n: int, *, atol: float = 1e-9) -> torch.Tensor:
    """``W`` if it is a gossip matrix (symmetric PSD ``(n, n)``, kernel exactly span(1)), else ValueError."""
    if not isinstance(W, torch.Tensor):
        raise TypeError(f"W: must be a tensor, got {type(W).__name__}")
    if W.shape != (n, n):
        raise ValueError(f"W: must have shape ({n}, {n}), got {tuple(W.shape)}")
    if not W.is_floating_point() or not bool(torch.isfinite(W).all()):
        raise ValueError("W: must be a finite floating-point matrix")
    Wd = W.detach().to("cpu", torch.float64)
    if not torch.allclose(Wd, Wd.T, atol=atol, rtol=0):
        raise ValueError("W: must be symmetric")
    ev = torch.linalg.eigvalsh(Wd)
    top = max(float(ev.max()), 1e-300)
    if float(ev.min()) < -atol * max(top, 1.0):
        raise ValueError(f"W: must be positive semidefinite (smallest eigenvalue {float(ev.min()):.3g})")
    if float(Wd.sum(1).abs().max()) > atol * max(top, 1.0) * n:
        raise ValueError("W: kernel must be the consensus space span(1) (W 1 != 0)")
    if n > 1 and int((ev <= atol * top).sum()) != 1:
        raise ValueError("W: kernel must be exactly span(1) (the graph is disconnected or W has more zeros)")
    return W


# ------------------------------------------------------------------------------------------------ set-up


@dataclass(frozen=True)
class MixedAffineSetup:
    """The constants of one method on one problem and graph (computed on every rank, identically).

    ``w_degree``: degree of :math:`P(W)` (1 without Chebyshev: :math:`W' = W`); ``w_mu``, ``w_L``: the
    spectrum bounds of :math:`W` the recurrence uses; ``mu_W``, ``L_W``: the bounds of :math:`W'^2`;
    ``chi``: :math:`\\lambda_{\\max}(W)/\\lambda^+_{\\min}(W)`; ``kappa_B``: condition number of
    :math:`K^\\top K` (before its Chebyshev); ``kappa_B1``, ``kappa_B2``: those of the blocks
    :math:`B_1^\\top B_1` (rows coupled + local on :math:`(x, y)`) and :math:`B_2^\\top B_2` (consensus +
    global rows on :math:`\\tilde x`); ``k1_*``, ``k2_*``: each block's Chebyshev bounds and degree (0 without
    Chebyshev or without the block); ``k_degree``: :math:`n_c`, the larger degree; ``mu_K``, ``L_K``: the
    bounds APAPC uses;
    the augmentation ``r``, ``gamma``; ``mu_G``, ``L_G``; APAPC's ``tau``, ``eta``, ``theta``, ``a``.
    """

    method: str
    chi: float
    w_degree: int
    w_mu: float
    w_L: float
    mu_W: float
    L_W: float
    L_A: float
    mu_A: float
    r: float
    gamma: float
    mu_f: float
    L_f: float
    mu_G: float
    L_G: float
    kappa_B: float
    kappa_B1: float
    kappa_B2: float
    k_degree: int
    k1_mu: float
    k1_L: float
    k1_degree: int
    k2_mu: float
    k2_L: float
    k2_degree: int
    mu_K: float
    L_K: float
    tau: float
    eta: float
    theta: float
    a: float

    @property
    def rounds_per_iteration(self) -> int:
        """Gossip rounds of one iteration (for a problem with both coupled and consensus rows)."""
        if self.method == "apapc-cheb":
            return 2 * self.w_degree * (self.k_degree + 1)
        return {"apapc": 4, "primal-dual": 2, "extra": 1}[self.method]

    def as_dict(self) -> dict[str, float]:
        """Every constant as a float (for records)."""
        return {k: float(v) for k, v in dataclasses.asdict(self).items() if k != "method"}


def _dense_blocks(
    prob: MixedAffineProblem, Wp: torch.Tensor, gamma: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense :math:`B_1` (rows q1, q2 on columns x, y) and :math:`B_2` (rows q3, q4 on xt); set-up only."""
    n, m, dt, r = prob.n, prob.m, prob.dt, prob.r
    A, C, Ct = (t.detach().to("cpu", torch.float64) for t in (prob.A, prob.C, prob.Ct))
    f64 = torch.float64
    B1 = torch.cat(
        [
            torch.cat([torch.block_diag(*A), gamma * torch.kron(Wp, torch.eye(m, dtype=f64))], 1),
            torch.cat([torch.block_diag(*C), torch.zeros(n * r, n * m, dtype=f64)], 1),
        ],
        0,
    )
    B2 = torch.cat([torch.kron(Wp, torch.eye(dt, dtype=f64)), torch.block_diag(*Ct)], 0)
    return B1, B2


def _gram_spectrum(B: torch.Tensor) -> torch.Tensor:
    if B.numel() == 0:
        return torch.zeros(0, dtype=torch.float64)
    return torch.linalg.eigvalsh(B.T @ B)


def _nonzero_bounds(ev: torch.Tensor, rel: float = 1e-10) -> tuple[float, float]:
    top = float(ev.max()) if ev.numel() else 0.0
    nz = ev[ev > rel * max(top, 1e-300)]
    if nz.numel() == 0:
        return 1.0, 1.0
    return float(nz.min()), float(nz.max())


def _image_bounds(ev: torch.Tensor, mu: float, L: float, degree: int) -> tuple[float, float]:
    """Exact image of the nonzero eigenvalues ``ev`` under the Chebyshev polynomial, snapped to nominal."""
    img = chebyshev_apply(lambda v: ev * v, torch.ones_like(ev), mu, L, degree)
    lo, hi = float(img.min()), float(img.max())
    if lo >= CHEB_LOW - 1e-12 and hi <= CHEB_HIGH + 1e-12:
        return CHEB_LOW, CHEB_HIGH
    return lo, hi


def mixed_affine_setup(
    problem: MixedAffineProblem,
    W: torch.Tensor,
    method: str = "apapc-cheb",
    *,
    w_degree: int | str = "sqrt",
    tau: float | None = None,
    eta: float | None = None,
    theta: float | None = None,
) -> MixedAffineSetup:
    r"""The constants of ``method`` (see the module docstring); ``w_degree``: ``"sqrt"``
    (:math:`\lceil\sqrt\chi\rceil`, default), ``"predecessor"`` (:math:`\lceil\chi\rceil`) or an int."""
    check_choice("method", method, METHODS)
    n = problem.n
    check_gossip_matrix(W, n)
    Wd = W.detach().to("cpu", torch.float64)
    evW = torch.linalg.eigvalsh(Wd)
    w_mu, w_L = _nonzero_bounds(evW) if n > 1 else (1.0, 1.0)
    chi = w_L / w_mu
    mu_f, L_f = problem.mu_f, problem.L_f
    if mu_f <= 0:
        raise ValueError(f"problem: f must be strongly convex (smallest Hessian eigenvalue {mu_f:.3g})")
    cheb = method == "apapc-cheb"
    if cheb:
        if w_degree == "sqrt":
            deg = max(1, math.ceil(math.sqrt(chi) - 1e-12))
        elif w_degree == "predecessor":
            deg = max(1, math.ceil(chi - 1e-12))
        else:
            deg = check_int("w_degree", w_degree, minimum=1)
        Wp = chebyshev_matrix(Wd, w_mu, w_L, deg) if n > 1 else Wd
        evWp = evW[evW > 1e-10 * max(w_L, 1e-300)]
        lo, hi = _image_bounds(evWp, w_mu, w_L, deg) if n > 1 else (1.0, 1.0)
    else:
        if w_degree not in ("sqrt", "predecessor", 1):
            raise ValueError(f"w_degree: only used by 'apapc-cheb', got {w_degree!r} for {method!r}")
        deg, Wp, lo, hi = 1, Wd, w_mu, w_L
    mu_W, L_W = lo**2, hi**2
    A = problem.A.detach().to("cpu", torch.float64)
    if problem.m:
        L_A = float(torch.linalg.matrix_norm(A, ord=2).max() ** 2)
        mu_A, _ = _nonzero_bounds(torch.linalg.eigvalsh((A @ A.transpose(1, 2)).mean(0)))
        if L_A <= 0:
            raise ValueError("A: the coupled constraint matrices are all zero")
        r = mu_f / (2 * L_A)
        gamma = math.sqrt((mu_A + L_A) / mu_W)
        mu_G = mu_f * min(0.5, (mu_A + L_A) / (4 * L_A))
        L_G = max(L_f + mu_f, mu_f * (mu_A + L_A) / L_A * L_W / mu_W)
    else:
        L_A = mu_A = r = 0.0
        gamma = 1.0
        mu_G, L_G = mu_f, L_f
    B1, B2 = _dense_blocks(problem, Wp, gamma)
    ev1, ev2 = _gram_spectrum(B1), _gram_spectrum(B2)
    blocks = []
    for ev in (ev1, ev2):
        top = float(ev.max()) if ev.numel() else 0.0
        nz = ev[ev > 1e-10 * max(top, 1e-300)] if ev.numel() else ev
        blocks.append((nz, *_nonzero_bounds(nz)) if nz.numel() else (nz, 0.0, 0.0))
    live = [(lo, hi) for nz, lo, hi in blocks if nz.numel()]
    k_mu = min((lo for lo, _ in live), default=1.0)
    k_L = max((hi for _, hi in live), default=1.0)
    kappa_B = k_L / k_mu
    kb = [hi / lo if lo > 0 else 1.0 for _, lo, hi in blocks]
    degs = [0, 0]
    if cheb:
        images = []
        for j, (nz, lo, hi) in enumerate(blocks):
            if nz.numel():
                degs[j] = max(1, math.ceil(math.sqrt(hi / lo) - 1e-12))
                images.append(_image_bounds(nz, lo, hi, degs[j]))
        mu_K = min((lo for lo, _ in images), default=1.0)
        L_K = max((hi for _, hi in images), default=1.0)
    else:
        mu_K, L_K = k_mu, k_L
    kappa_G = L_G / mu_G
    if method == "primal-dual":
        tau_ = 1.0
        eta_ = 1.0 / L_G if eta is None else check_positive("eta", eta)
        theta_ = mu_G / L_K if theta is None else check_positive("theta", theta)
    elif method == "extra":
        if float(evW.max()) >= 2 - 1e-9:
            raise ValueError("W: 'extra' mixes with M = I - W, which needs lambda_max(W) < 2")
        tau_ = 1.0
        lam_min_mt = float(1 - evW.max() / 2)  # smallest eigenvalue of (I + M)/2 = I - W/2
        eta_ = lam_min_mt / L_f if eta is None else check_positive("eta", eta)
        theta_ = 0.0
    else:
        tau_ = min(1.0, 0.5 * math.sqrt((L_K / mu_K) / kappa_G)) if tau is None else float(tau)
        if not 0 < tau_ <= 1:
            raise ValueError(f"tau: must lie in (0, 1], got {tau}")
        eta_ = 1.0 / (4 * tau_ * L_G) if eta is None else check_positive("eta", eta)
        theta_ = 1.0 / (eta_ * L_K) if theta is None else check_positive("theta", theta)
    return MixedAffineSetup(
        method=method,
        chi=chi,
        w_degree=deg,
        w_mu=w_mu,
        w_L=w_L,
        mu_W=mu_W,
        L_W=L_W,
        L_A=L_A,
        mu_A=mu_A,
        r=r,
        gamma=gamma,
        mu_f=mu_f,
        L_f=L_f,
        mu_G=mu_G,
        L_G=L_G,
        kappa_B=kappa_B,
        kappa_B1=kb[0],
        kappa_B2=kb[1],
        k_degree=max(degs),
        k1_mu=blocks[0][1],
        k1_L=blocks[0][2],
        k1_degree=degs[0],
        k2_mu=blocks[1][1],
        k2_L=blocks[1][2],
        k2_degree=degs[1],
        mu_K=mu_K,
        L_K=L_K,
        tau=tau_,
        eta=eta_,
        theta=theta_,
        a=mu_G,
    )


# ------------------------------------------------------------------------------------------------ operators


class _Ops:
    """The local operators of one process: :math:`W'` products (gossip), :math:`K`, :math:`K^\\top`, grads."""

    def __init__(self, prob: MixedAffineProblem, comm: Any, W: torch.Tensor, st: MixedAffineSetup) -> None:
        sl = slice(comm.local_clients.start, comm.local_clients.stop)
        self.comm, self.st, self.prob, self.clients = comm, st, prob, comm.local_clients
        self.A, self.b, self.C, self.c = prob.A[sl], prob.b[sl], prob.C[sl], prob.c[sl]
        self.Ct, self.ct = prob.Ct[sl], prob.ct[sl]
        self.AC = torch.cat([self.A, self.C], 1)  # [A_i; C_i]: one batched product for both row blocks
        self.bc = torch.cat([self.b, self.c], 1)
        self.W = W.to(dtype=prob.H.dtype, device=prob.H.device)
        self.d, self.m, self.dt = prob.d, prob.m, prob.dt
        self.grad_calls = 0
        self.k_products = 0  # products with K or K^T (local mat-vecs with A_i, C_i, Ct_i)

    def gossip(self, V: torch.Tensor) -> torch.Tensor:
        return self.comm.gossip(V, self.W)

    def wp(self, V: torch.Tensor) -> torch.Tensor:
        """:math:`W' V` (``w_degree`` gossip rounds; one round of ``W`` without Chebyshev)."""
        st = self.st
        if st.w_degree == 1 and st.method != "apapc-cheb":
            return self.gossip(V)
        return chebyshev_apply(self.gossip, V, st.w_mu, st.w_L, st.w_degree)

    def split(self, U: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        d, m = self.d, self.m
        return U[:, :d], U[:, d : d + m], U[:, d + m :]

    def K(self, U: torch.Tensor) -> torch.Tensor:
        """:math:`Ku - b'` rows ``[q1 (m), q3 (dt), q2 (r), q4 (rt)]`` (one :math:`W'` product)."""
        X, _, Xt = self.split(U)
        self.k_products += 1
        WV = self.wp(U[:, self.d :])  # payload [Y, Xt]
        q12 = _bmv(self.AC, X) - self.bc
        q1 = q12[:, : self.m] + self.st.gamma * WV[:, : self.m]
        q3 = WV[:, self.m :]
        q2 = q12[:, self.m :]
        q4 = _bmv(self.Ct, Xt) - self.ct
        return torch.cat([q1, q3, q2, q4], 1)

    def KT(self, Q: torch.Tensor) -> torch.Tensor:
        """:math:`K^\\top q` for rows ``[q1, q3, q2, q4]`` (one :math:`W'` product)."""
        m, dt, r = self.m, self.dt, self.prob.r
        q1, q2, q4 = Q[:, :m], Q[:, m + dt : m + dt + r], Q[:, m + dt + r :]
        self.k_products += 1
        WQ = self.wp(Q[:, : m + dt])  # payload [q1, q3]
        gx = _bmtv(self.AC, torch.cat([q1, q2], 1))
        gy = self.st.gamma * WQ[:, :m]
        gt = WQ[:, m:] + _bmtv(self.Ct, q4)
        return torch.cat([gx, gy, gt], 1)

    def KTK(self, U: torch.Tensor, blocks: tuple[bool, bool]) -> torch.Tensor:
        """:math:`K^\\top(KU - b')` on the active blocks (zero columns elsewhere); two :math:`W'` products.

        Block 1 is :math:`B_1` on the ``(x, y)`` columns, block 2 is :math:`B_2` on the ``xt`` columns; the
        gossip payload of each product holds only the active blocks' columns.
        """
        d, m = self.d, self.m
        on1, on2 = blocks
        X, Y, Xt = self.split(U)
        self.k_products += 2
        pay = torch.cat(([Y] if on1 else []) + ([Xt] if on2 else []), 1)
        WV = self.wp(pay)
        out = torch.zeros_like(U)
        pay2 = []
        if on1:
            q12 = _bmv(self.AC, X) - self.bc
            q1 = q12[:, :m] + self.st.gamma * WV[:, :m]
            q2 = q12[:, m:]
            pay2.append(q1)
        if on2:
            q3 = WV[:, m:] if on1 else WV
            q4 = _bmv(self.Ct, Xt) - self.ct
            pay2.append(q3)
        WQ = self.wp(torch.cat(pay2, 1))
        if on1:
            out[:, :d] = _bmtv(self.AC, torch.cat([q1, q2], 1))
            out[:, d : d + m] = self.st.gamma * WQ[:, :m]
        if on2:
            out[:, d + m :] = (WQ[:, m:] if on1 else WQ) + _bmtv(self.Ct, q4)
        return out

    def cheb_KTK(self, V0: torch.Tensor) -> torch.Tensor:
        """:func:`chebyshev_apply` of :math:`K^\\top(K\\cdot - b')`, one polynomial per block, in lockstep."""
        st = self.st
        cols = (slice(0, self.d + self.m), slice(self.d + self.m, None))
        spec = [(st.k1_mu, st.k1_L, st.k1_degree), (st.k2_mu, st.k2_L, st.k2_degree)]
        rho = [(L - mu) ** 2 / 16.0 for mu, L, _ in spec]
        nu = [(L + mu) / 2.0 for mu, L, _ in spec]
        delta = [-v / 2.0 for v in nu]
        on = (spec[0][2] > 0, spec[1][2] > 0)
        R = self.KTK(V0, on)
        P = torch.zeros_like(V0)
        for j in range(2):
            if on[j]:
                P[:, cols[j]] = -R[:, cols[j]] / nu[j]
        V = V0 + P
        for step in range(1, max(s[2] for s in spec)):
            act = (step < spec[0][2], step < spec[1][2])
            R = self.KTK(V, act)
            for j in range(2):
                if act[j]:
                    beta = rho[j] / delta[j]
                    delta[j] = -(nu[j] + beta)
                    P[:, cols[j]] = (R[:, cols[j]] + beta * P[:, cols[j]]) / delta[j]
                    V[:, cols[j]] += P[:, cols[j]]
        return V0 - V

    def grad_f(self, U: torch.Tensor) -> torch.Tensor:
        """:math:`\\nabla F` in u-space (zero on ``y``); one gradient call per node."""
        X, Y, Xt = self.split(U)
        self.grad_calls += 1
        g = self.prob.grad(torch.cat([X, Xt], 1), self.clients)
        return torch.cat([g[:, : self.d], torch.zeros_like(Y), g[:, self.d :]], 1)

    def q1(self, U: torch.Tensor) -> torch.Tensor:
        """The coupled rows :math:`A_ix_i + \\gamma(W'y)_i - b_i` (one :math:`W'` product of ``y``)."""
        X, Y, _ = self.split(U)
        return _bmv(self.A, X) + self.st.gamma * self.wp(Y) - self.b

    def grad_G(self, U: torch.Tensor) -> torch.Tensor:
        """:math:`\\nabla G(u)` (two :math:`W'` products when there is a coupled constraint)."""
        g = self.grad_f(U)
        if not self.m or self.st.r == 0:
            return g
        R = self.q1(U)
        self.k_products += 2
        gx = _bmtv(self.A, R)
        gy = self.st.gamma * self.wp(R)
        aug = torch.cat([gx, gy, torch.zeros_like(U[:, self.d + self.m :])], 1)
        return g + self.st.r * aug


# ------------------------------------------------------------------------------------------------ solver


def _metrics(
    ops: _Ops, U: torch.Tensor, dual: Any, x_star: tuple[torch.Tensor, torch.Tensor] | None
) -> dict[str, float]:
    """Monitoring (not counted): objective, original-constraint residual, KKT residual, distance to u*."""
    comm, prob = ops.comm, ops.prob
    X, _, Xt = ops.split(U)
    with comm.stats.paused():
        Z = torch.cat([X, Xt], 1)
        f = float(comm.client_sum(prob.loss(Z, ops.clients).unsqueeze(1))[0])
        coupled = comm.client_sum(_bmv(ops.A, X) - ops.b) if ops.m else U.new_zeros(0)
        xbar = comm.client_mean(Xt)
        loc = (
            (_bmv(ops.C, X) - ops.c).pow(2).sum(1)
            + (_bmv(ops.Ct, Xt) - ops.ct).pow(2).sum(1)
            + (Xt - xbar).pow(2).sum(1)
        )
        res2 = float(coupled.pow(2).sum()) + float(comm.client_sum(loc.unsqueeze(1))[0])
        row = {"objective": f, "residual": math.sqrt(max(res2, 0.0))}
        gc, kc = ops.grad_calls, ops.k_products
        if ops.st.method == "extra":
            gbar = comm.client_sum(prob.grad(Z, ops.clients))
            kkt2 = float(gbar.pow(2).sum()) + float(
                comm.client_sum((Xt - xbar).pow(2).sum(1, keepdim=True))[0]
            )
        else:
            stat = ops.grad_G(U)
            if dual is not None:
                stat = stat + (dual() if callable(dual) else dual)
            feas = ops.K(U)
            per = stat.pow(2).sum(1) + feas.pow(2).sum(1)
            kkt2 = float(comm.client_sum(per.unsqueeze(1))[0])
        ops.grad_calls, ops.k_products = gc, kc
        row["kkt"] = math.sqrt(max(kkt2, 0.0))
        if x_star is not None:
            Xs, xts = x_star
            Xs = Xs[ops.clients.start : ops.clients.stop].to(dtype=U.dtype, device=U.device)
            xts = xts.to(dtype=U.dtype, device=U.device)
            err = (X - Xs).pow(2).sum(1) + (Xt - xts).pow(2).sum(1)
            ref = Xs.pow(2).sum(1) + xts.pow(2).sum().expand(X.shape[0])
            num = float(comm.client_sum(err.unsqueeze(1))[0])
            den = float(comm.client_sum(ref.unsqueeze(1))[0])
            row["rel_err"] = math.sqrt(num / max(den, 1e-300))
    return row


def solve_mixed_affine(
    problem: MixedAffineProblem,
    comm: Any,
    W: torch.Tensor,
    *,
    method: str = "apapc-cheb",
    max_iter: int = 10_000,
    tol: float | None = None,
    x_star: tuple[torch.Tensor, torch.Tensor] | None = None,
    criterion: str | None = None,
    w_degree: int | str = "sqrt",
    max_rounds: int | None = None,
    tau: float | None = None,
    eta: float | None = None,
    theta: float | None = None,
    record_every: int = 1,
    time_limit_s: float | None = None,
) -> Result:
    r"""Solve the mixed affine-constrained problem on this rank's nodes with ``method`` (:data:`METHODS`).

    Args:
        problem: a :class:`MixedAffineProblem` (every node's data; this rank uses its block).
        comm: this process's :class:`~optarium.distributed.comm.Communicator` (``Communicator.local(n)``).
        W: the ``(n, n)`` gossip matrix: symmetric PSD with kernel span(1), e.g. ``I - mixing_matrix(...)``.
        method: ``"apapc-cheb"`` (the paper's), ``"apapc"``, ``"primal-dual"`` or ``"extra"``
            (consensus-only problems).
        max_iter: iteration budget (status ``max_iter``).
        tol: stop (``converged``) once ``criterion`` is at most ``tol``.
        x_star: the exact ``(X*, xt*)`` (from :meth:`MixedAffineProblem.solution`) to record ``rel_err``.
        criterion: the stopping metric, ``"rel_err"`` (default when ``x_star`` is given) or ``"kkt"``.
        w_degree: degree of the gossip polynomial of ``apapc-cheb`` (``"sqrt"``, ``"predecessor"``, int).
        max_rounds: gossip-round budget; the run stops after the iteration that reaches it (status
            ``max_iter``).
        tau, eta, theta: override the default parameters.
        record_every: record the history every this many iterations (and at the last one).
        time_limit_s: budget of solver seconds (evaluation excluded), agreed by all ranks.

    Returns:
        :class:`~optarium._core.result.Result`: ``x = {"x": X, "xt": Xt}`` (this rank's rows; the output
        point :math:`u_f` for APAPC), ``value`` :math:`\sum_i f_i`, history rows (objective, residual of the
        original constraints, kkt, rel_err, gossip_rounds, uplink_bits, grad_calls, k_products) and
        ``extras``: the local ``U`` block, the constants (:class:`MixedAffineSetup` as a dict) and the
        communication statistics.

    Raises:
        InfeasibleProblemError: the constraints are inconsistent (least-squares preflight).
    """
    from optarium.distributed.rounds import rank_agreement

    if not isinstance(problem, MixedAffineProblem):
        raise TypeError(f"problem: must be a MixedAffineProblem, got {type(problem).__name__}")
    if int(comm.n_clients) != problem.n:
        raise ValueError(f"comm: has {comm.n_clients} clients, the problem {problem.n} nodes")
    check_choice("method", method, METHODS)
    max_iter = check_int("max_iter", max_iter, minimum=0)
    record_every = check_int("record_every", record_every, minimum=1)
    if max_rounds is not None:
        max_rounds = check_int("max_rounds", max_rounds, minimum=1)
    if tol is not None:
        tol = check_positive("tol", tol)
    if criterion is None:
        criterion = "rel_err" if x_star is not None else "kkt"
    check_choice("criterion", criterion, ("rel_err", "kkt"))
    if criterion == "rel_err" and x_star is None:
        raise ValueError("criterion: 'rel_err' needs x_star")
    if x_star is not None:
        if not (isinstance(x_star, (tuple, list)) and len(x_star) == 2):
            raise TypeError("x_star: must be a pair (X* (n, d), xt* (dt,))")
        if tuple(x_star[0].shape) != (problem.n, problem.d) or tuple(x_star[1].shape) != (problem.dt,):
            raise ValueError(f"x_star: shapes must be ({problem.n}, {problem.d}) and ({problem.dt},)")
    if method == "extra" and (problem.d or problem.m or problem.r or problem.rt):
        raise ValueError("method: 'extra' solves consensus-only problems (d = m = r = rt = 0)")
    res = problem.feasibility_residual()
    if res > 1e-8 * max(
        1.0,
        float(
            torch.cat([problem.b.flatten(), problem.c.flatten(), problem.ct.flatten(), problem.b.new_ones(1)])
            .abs()
            .max()
        ),
    ):
        raise InfeasibleProblemError(
            f"problem: the constraints are inconsistent (least-squares residual {res:.3g})"
        )
    st = mixed_affine_setup(problem, W, method, w_degree=w_degree, tau=tau, eta=eta, theta=theta)
    ops = _Ops(problem, comm, W, st)
    like = problem.H
    nl = comm.n_local
    U = like.new_zeros((nl, problem.d + problem.m + problem.dt))
    stats = comm.stats
    r0 = stats.uplink_rounds
    b0 = stats.uplink_bits.clone()
    loop = SolverLoop(
        max_iter,
        tol=tol,
        criterion=criterion,
        record_every=record_every,
        time_limit_s=time_limit_s,
        objective="objective",
        blowup=1e12,
        blowup_floor=1.0,
        agree=rank_agreement(comm, like),
    )
    state: dict[str, Any] = {"out": U, "dual": None}

    def evaluate(k: int) -> dict[str, float]:
        row = _metrics(ops, state["out"], state["dual"], x_star)
        with stats.paused():
            bits = comm.client_mean((stats.uplink_bits - b0).to(like.dtype).unsqueeze(1))
        row.update(
            gossip_rounds=float(stats.uplink_rounds - r0),
            uplink_bits=float(bits[0]),
            grad_calls=float(ops.grad_calls),
            k_products=float(ops.k_products),
        )
        return row

    def over_budget() -> None:
        if max_rounds is not None and stats.uplink_rounds - r0 >= max_rounds:
            loop.stop("max_iter")

    if method in ("apapc-cheb", "apapc"):
        u, uf, z = U, U.clone(), torch.zeros_like(U)
        tau_, eta_, theta_, a = st.tau, st.eta, st.theta, st.a
        state.update(out=uf, dual=z)
        for _ in loop.iterate(evaluate):
            ug = tau_ * u + (1 - tau_) * uf
            g = ops.grad_G(ug) - a * ug
            uh = (u - eta_ * (g + z)) / (1 + eta_ * a)
            if method == "apapc-cheb":
                step = ops.cheb_KTK(uh)
            else:
                step = ops.KT(ops.K(uh))
            z = z + theta_ * step
            un = (u - eta_ * (g + z)) / (1 + eta_ * a)
            uf = ug + (2 * tau_ / (2 - tau_)) * (un - u)
            u = un
            state.update(out=uf, dual=z)
            over_budget()
    elif method == "primal-dual":
        u = U
        zc = like.new_zeros((nl, problem.m + problem.dt + problem.r + problem.rt))
        eta_, theta_ = st.eta, st.theta
        state.update(out=u, dual=lambda: ops.KT(zc))
        for _ in loop.iterate(evaluate):
            q = ops.K(u)
            lift = zc.clone()
            lift[:, : problem.m] += st.r * q[:, : problem.m]  # the augmentation shares the K^T product
            g = ops.grad_f(u) + ops.KT(lift)
            u = u - eta_ * g
            zc = zc + theta_ * q
            state.update(out=u, dual=lambda zc=zc: ops.KT(zc))
            over_budget()
    else:  # extra, consensus only: U holds xt
        M = torch.eye(problem.n, dtype=like.dtype, device=like.device) - W.to(
            dtype=like.dtype, device=like.device
        )
        alpha = st.eta
        x, x_prev = U, None
        Mx_prev = g_prev = U
        for _ in loop.iterate(evaluate):
            Mx = comm.gossip(x, M)
            g = ops.grad_f(x)
            if x_prev is None:
                x_new = Mx - alpha * g
            else:
                x_new = x + Mx - 0.5 * (x_prev + Mx_prev) - alpha * (g - g_prev)
            x_prev, Mx_prev, g_prev, x = x, Mx, g, x_new
            state.update(out=x)
            over_budget()
    out = state["out"]
    X, _, Xt = ops.split(out)
    with stats.paused():
        value = float(comm.client_sum(problem.loss(torch.cat([X, Xt], 1), ops.clients).unsqueeze(1))[0])
    extras = {"U": out, "setup": st.as_dict(), "comm": stats.as_dict()}
    return loop.result({"x": X, "xt": Xt}, value=value, extras=extras)


def spmd_solve(
    comm: Any, jobs: Sequence[tuple[MixedAffineProblem, torch.Tensor, Mapping[str, Any]]]
) -> list[Result]:
    """Run ``(problem, W, kwargs)`` jobs on this rank (for ``launch``), dispatching on ``kwargs["method"]``:
    APAPC, EXTRA and primal-dual by :func:`solve_mixed_affine`, Tracking-ADMM and DPMM by
    :func:`optarium.distributed.decentralized_affine_baselines.solve_coupled_baseline`.

    Statistics are reset before each job; each result's ``extras["U"]`` and ``x`` are replaced by every
    node's rows (gathered without charging the statistics).
    """
    from optarium.distributed.decentralized_affine_baselines import BASELINES, solve_coupled_baseline

    out = []
    for problem, W, kw in jobs:
        kw = dict(kw)
        method = kw.get("method", "apapc-cheb")
        check_choice("method", method, METHODS + BASELINES)
        comm.stats.reset()
        if method in BASELINES:
            res = solve_coupled_baseline(problem, comm, W, **kw)
        else:
            res = solve_mixed_affine(problem, comm, W, **kw)
        with comm.stats.paused():
            U = comm.all_gather_clients(res.extras["U"])
            x = {k: comm.all_gather_clients(v) for k, v in res.x.items()}
        out.append(dataclasses.replace(res, x=x, extras={**res.extras, "U": U}))
    return out


# ------------------------------------------------------------------------------------------------ conformance


def solver_cases() -> list[SolverCase]:
    """Conformance case: APAPC + Chebyshev on a 4-node ring instance (``d=3, dt=2, m=2, r=1``)."""
    from optarium.distributed.comm import Communicator
    from optarium.distributed.topology import mixing_matrix

    ref = make_mixed_affine(4, d=3, dt=2, m=2, r=1, rt_nodes=(0,), kappa_f=5.0, seed=0)
    Xs, xts, _ = ref.solution()
    Wg = torch.eye(4, dtype=torch.float64) - mixing_matrix("ring", 4)
    scale = math.sqrt(float(Xs.pow(2).sum() + 4 * xts.pow(2).sum()))

    def solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
        p = ref.to(dtype=dtype, device=device)
        kw: dict[str, Any] = {"max_iter": 30, "x_star": (Xs, xts), **overrides}
        W = kw.pop("W", Wg).to(dtype=dtype, device=device)
        return solve_mixed_affine(p, Communicator.local(4), W, **kw)

    def dist(res: Result) -> float:
        X = torch.as_tensor(res.x["x"]).detach().to("cpu", torch.float64)
        Xt = torch.as_tensor(res.x["xt"]).detach().to("cpu", torch.float64)
        return math.sqrt(float((X - Xs).pow(2).sum() + (Xt - xts).pow(2).sum())) / scale

    tol = 1e-9
    return [
        SolverCase(
            name="decentralized-affine",
            solve=solve,
            statuses={
                "converged": {"tol": tol, "max_iter": 2000},
                "max_iter": {"max_iter": 7},
                "diverged": {"method": "primal-dual", "eta": 50.0},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=7,
            tolerance_holds=lambda res: dist(res) <= tol * (1 + 1e-6),
            optimality=dist,
            optimality_tol=1e-8,
            invalid=[
                ({"method": "newton"}, "method"),
                ({"max_iter": -1}, "max_iter"),
                ({"tol": -1.0}, "tol"),
                ({"criterion": "gap"}, "criterion"),
                ({"record_every": 0}, "record_every"),
                ({"max_rounds": 0}, "max_rounds"),
                ({"W": torch.eye(4, dtype=torch.float64)}, "W"),
                ({"x_star": (Xs[:2], xts)}, "x_star"),
                ({"time_limit_s": -1.0}, "time_limit_s"),
            ],
        )
    ]
