r"""Multi-task bilevel instances with a generally convex lower level and known solutions (ECMO form).

Both instances share the lower level :math:`g(x, y) = \tfrac12\lVert A y - B x\rVert^2` with
:math:`A = U\,\mathrm{diag}(s)\,V^\top \in \mathbb{R}^{m\times d_y}` of rank ``rank`` (``U``, ``V``
orthonormal from QR of Gaussian matrices, :math:`s` = linspace(0.3, 1, rank), so :math:`\lVert A\rVert = 1`)
and a Gaussian :math:`B \in \mathbb{R}^{m\times d_x}` rescaled to :math:`\lVert B\rVert_2 = 1`. With
``rank < dy`` the lower level has a whole affine set of solutions (not strongly convex). The ECMO constraint
is :math:`h(z) = \nabla_y g = A^\top(Ay - Bx) = J z` with :math:`J = [-A^\top B,\ A^\top A]`, so
:math:`J_h^\top h = J^\top J z` in closed form and :math:`\lVert J\rVert^2 \le 4`.

- :class:`QuadraticMTBL` (:func:`quadratic_mtbl`): :math:`F_s = \tfrac12\lVert y - a_s\rVert^2 +
  \tfrac12\lVert x - b_s\rVert^2` with Gaussian targets (generically infeasible, so :math:`F_s > 0` on the
  feasible set). Convex, with ground truths: the exact penalised Chebyshev minimiser (epigraph QCQP in
  cvxpy/Clarabel), the weighted-sum penalised minimiser (a linear system), the constrained Chebyshev
  solution (cvxpy) and, for :math:`S = 1`, the closed-form optimistic bilevel solution.
- :class:`FonsecaFlemingMTBL` (:func:`fonseca_fleming_mtbl`): :math:`F_s = 1 - \exp(-\lVert z -
  a_s\rVert^2)` with :math:`a_{1,2} = \pm(c + n)`: :math:`c` the unit vector along the projection of
  :math:`(1/\sqrt D)\mathbf 1` on the lower level's feasible subspace :math:`\{z : Jz = 0\}`, :math:`n`
  along its projection on the orthogonal complement, scaled to norm ``offset`` (design: the spec's
  :math:`a_s = \pm(1/\sqrt D)\mathbf 1`, split so that the front stays known in closed form). On the
  feasible subspace :math:`\lVert z - a_s\rVert^2 = \lVert z \mp c\rVert^2 + \lVert n\rVert^2`, so the
  bilevel (constrained) Pareto set is the segment :math:`z = t c`, :math:`t\in[-1, 1]`, with the front
  :math:`F_{1,2}(t) = 1 - e^{-\lVert n\rVert^2} e^{-(1\mp t)^2}` (:func:`fonseca_fleming_front`): the
  concave, i.e. non-convex, Fonseca–Fleming front. The constraint is active (the unconstrained Pareto set
  :math:`[-a_1, a_1]` leaves the subspace when ``offset > 0``), so a penalty method lands within
  :math:`O(1/\rho)` of it. The constrained Chebyshev point for :math:`\omega` solves :math:`\omega_1 F_1 =
  \omega_2 F_2` on the front (bisection).

Every problem is an :class:`optarium.bilevel.ECMOProblem` with closed-form oracles (checked against
autograd in the tests), batched over leading dimensions, in the dtype and device it was built with.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from optarium._core.validation import check_int, check_positive
from optarium.bilevel.chebyshev import ECMOProblem

__all__ = [
    "FonsecaFlemingMTBL",
    "LinearLowerLevel",
    "QuadraticMTBL",
    "fonseca_fleming_front",
    "fonseca_fleming_mtbl",
    "quadratic_mtbl",
]


class LinearLowerLevel(ECMOProblem):
    """The shared lower level ``g = ||A y - B x||^2 / 2`` with closed-form constraint oracles.

    Subclasses supply the upper objectives through :meth:`objectives` and :meth:`objective_grads`.
    """

    def __init__(self, A: torch.Tensor, B: torch.Tensor, n_objectives: int) -> None:
        if not isinstance(A, torch.Tensor) or A.ndim != 2:
            raise TypeError("A: must be a 2-d tensor")
        if not isinstance(B, torch.Tensor) or B.ndim != 2 or B.shape[0] != A.shape[0]:
            raise ValueError(f"B: must be 2-d with {A.shape[0]} rows")
        self.A, self.B = A, B
        self.dx, self.dy = B.shape[1], A.shape[1]
        self.Myy = A.T @ A
        self.Myx = A.T @ B
        self.J = torch.cat([-self.Myx, self.Myy], 1)  # (dy, dx + dy)
        self.jacobian_norm2 = float(torch.linalg.matrix_norm(self.J, ord=2) ** 2)
        # Rows spanning the constraint: A^T v = 0 <=> U_r^T v = 0 (U_r: left singular vectors of A, s > 0)
        U, s, _ = torch.linalg.svd(A, full_matrices=False)
        self.U_r = U[:, s > 1e-10 * float(s.max())]
        K = self.U_r.T @ torch.cat([-B, A], 1)  # (r, dx + dy), full row rank
        _, _, Vh = torch.linalg.svd(K, full_matrices=True)
        self.null_basis = Vh[K.shape[0] :].T  # (dx + dy, dx + dy - r): the feasible subspace
        self.K = K
        self._S = n_objectives
        lower = self.lower_level_value
        super().__init__([self._objective(i) for i in range(n_objectives)], lower)

    def _objective(self, i: int) -> Any:
        return lambda x, y: self.objectives(x, y)[..., i]

    @property
    def n_objectives(self) -> int:
        """The number of tasks S."""
        return self._S

    def lower_level_value(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``g(x, y) = ||A y - B x||^2 / 2``."""
        return 0.5 * ((y @ self.A.T - x @ self.B.T) ** 2).sum(-1)

    def constraint(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``h = A^T (A y - B x)`` ``(..., dy)``."""
        return y @ self.Myy - x @ self.Myx.T

    def penalty_grad(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``J^T h``: ``(-B^T A h, A^T A h)``."""
        h = self.constraint(x, y)
        return -h @ self.Myx, h @ self.Myy

    def penalty_grad_z(self, z: torch.Tensor, dx: int) -> torch.Tensor:
        """``J^T J z`` (two products with ``J``)."""
        return (z @ self.J.T) @ self.J

    def constraint_jacobian(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(-A^T B, A^T A)`` broadcast to the batch."""
        batch = x.shape[:-1]
        return self.Myx.neg().expand(*batch, *self.Myx.shape), self.Myy.expand(*batch, *self.Myy.shape)

    def split(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``z (..., dx + dy) -> (x, y)``."""
        return z[..., : self.dx], z[..., self.dx :]


def _lower_level(
    m: int, dy: int, dx: int, rank: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    U, _ = torch.linalg.qr(torch.randn(m, rank, generator=gen, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(dy, rank, generator=gen, dtype=torch.float64))
    s = torch.linspace(0.3, 1.0, rank, dtype=torch.float64)
    A = U @ torch.diag(s) @ V.T
    B = torch.randn(m, dx, generator=gen, dtype=torch.float64)
    B = B / torch.linalg.matrix_norm(B, ord=2)
    return A, B


def _check_dims(m: int, dy: int, dx: int, rank: int) -> tuple[int, int, int, int]:
    m = check_int("m", m, minimum=1)
    dy = check_int("dy", dy, minimum=1)
    dx = check_int("dx", dx, minimum=1)
    rank = check_int("rank", rank, minimum=1, maximum=min(m, dy))
    return m, dy, dx, rank


class QuadraticMTBL(LinearLowerLevel):
    """Quadratic tasks ``F_s = ||y - a_s||^2 / 2 + ||x - b_s||^2 / 2`` over the shared lower level.

    Attributes: ``A``, ``B``, ``a`` (S, dy), ``b`` (S, dx), ``J``, ``jacobian_norm2`` (``||J||^2``).
    """

    def __init__(self, A: torch.Tensor, B: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0]:
            raise ValueError("a: targets a (S, dy) and b (S, dx) must share S")
        self.a, self.b = a, b
        self.c = torch.cat([b, a], 1)  # (S, dx + dy): the task targets in z
        super().__init__(A, B, a.shape[0])

    def objectives(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(..., S)``."""
        dy = y.unsqueeze(-2) - self.a
        dx = x.unsqueeze(-2) - self.b
        return 0.5 * ((dy**2).sum(-1) + (dx**2).sum(-1))

    def objective_grads(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x - b_s, y - a_s)`` stacked over ``s``."""
        return x.unsqueeze(-2) - self.b, y.unsqueeze(-2) - self.a

    def first_order(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(F, gx, gy)`` sharing the residuals."""
        gx, gy = self.objective_grads(x, y)
        return 0.5 * ((gx**2).sum(-1) + (gy**2).sum(-1)), gx, gy

    def first_order_z(self, z: torch.Tensor, dx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(F, G)`` with ``G_s = z - c_s``."""
        G = z.unsqueeze(-2) - self.c
        return 0.5 * (G * G).sum(-1), G

    # ---------------------------------------------------------------------------------------- ground truth
    def penalised_linear(self, preference: torch.Tensor, penalty: float) -> torch.Tensor:
        """The weighted-sum penalised minimiser ``z (..., dx + dy)``: ``(sum(w) I + rho J^T J) z = w c``."""
        w = preference.to(self.A)
        n = self.J.shape[1]
        M = w.sum(-1)[..., None, None] * torch.eye(n, dtype=self.A.dtype) + penalty * (self.J.T @ self.J)
        rhs = w @ self.c
        return torch.linalg.solve(M, rhs.unsqueeze(-1)).squeeze(-1)

    def penalised_chebyshev(
        self, preference: torch.Tensor, penalty: float, ref_point: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The exact minimiser of ``max_s w_s (F_s - r_s) + rho/2 ||h||^2`` per row of ``preference``.

        ``S = 2``: by minimax duality it is ``z(l) = argmin l w_1 F_1 + (1 - l) w_2 F_2 + rho/2 ||J z||^2``
        (a linear solve in the eigenbasis of ``J^T J``) at the ``l`` in [0, 1] maximising the concave dual,
        whose derivative ``w_1 (F_1 - r_1) - w_2 (F_2 - r_2)`` at ``z(l)`` is found by bisection (exact to
        rounding). ``S > 2``: the epigraph QCQP ``min t + rho/2 ||J z||^2 s.t. w_s (F_s - r_s) <= t`` in
        cvxpy (Clarabel), :meth:`cvx_chebyshev`. Returns ``(P, dx + dy)``.
        """
        penalty = check_positive("penalty", penalty)
        if self._S != 2:
            return self.cvx_chebyshev(preference, penalty, ref_point).to(self.A)
        e, Q = torch.linalg.eigh(self.J.T @ self.J)

        def solve(alpha: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
            return ((rhs @ Q) / (alpha.unsqueeze(-1) + penalty * e)) @ Q.T

        return self._dual_bisection(preference, ref_point, solve)

    def constrained_chebyshev(
        self, preference: torch.Tensor, ref_point: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The constrained Chebyshev solution: ``min max_s w_s (F_s - r_s) s.t. A^T (A y - B x) = 0``.

        ``S = 2``: the same dual bisection with ``z(l)`` the projection of the weighted target on the
        feasible subspace; ``S > 2``: cvxpy.
        """
        if self._S != 2:
            return self.cvx_chebyshev(preference, None, ref_point).to(self.A)
        N = self.null_basis

        def solve(alpha: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
            return ((rhs @ N) @ N.T) / alpha.unsqueeze(-1)

        return self._dual_bisection(preference, ref_point, solve)

    def _dual_bisection(self, preference: torch.Tensor, ref_point: torch.Tensor | None, solve: Any) -> Any:
        W = preference.to(self.A).reshape(-1, 2)
        r = torch.zeros(2, dtype=self.A.dtype, device=self.A.device)
        if ref_point is not None:
            r = ref_point.to(self.A)

        def z_of(lam: torch.Tensor) -> torch.Tensor:
            c = torch.stack([lam * W[:, 0], (1 - lam) * W[:, 1]], -1)  # (P, 2): the dual weights
            return solve(c.sum(-1).clamp_min(1e-300), c @ self.c)

        def slope(lam: torch.Tensor) -> torch.Tensor:
            x, y = self.split(z_of(lam))
            F = self.objectives(x, y)
            return W[:, 0] * (F[:, 0] - r[0]) - W[:, 1] * (F[:, 1] - r[1])

        lo = torch.zeros(W.shape[0], dtype=self.A.dtype, device=self.A.device)
        hi = torch.ones_like(lo)
        lam = torch.where(slope(hi) >= 0, hi, torch.where(slope(lo) <= 0, lo, torch.full_like(lo, -1.0)))
        todo = lam < 0
        for _ in range(200):  # the dual derivative decreases in lambda
            mid = 0.5 * (lo + hi)
            pos = slope(mid) > 0
            lo = torch.where(pos, mid, lo)
            hi = torch.where(pos, hi, mid)
        lam = torch.where(todo, 0.5 * (lo + hi), lam)
        return z_of(lam)

    def cvx_chebyshev(
        self, preference: torch.Tensor, penalty: float | None, ref_point: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The Chebyshev minimisers by cvxpy (Clarabel) in epigraph form, penalised (``penalty``) or
        constrained (``penalty=None``); the independent reference of the dual bisection. Float64, CPU."""
        import cvxpy as cp
        import numpy as np

        W = preference.detach().cpu().double().reshape(-1, self._S).numpy()
        r = np.zeros(self._S) if ref_point is None else ref_point.detach().cpu().double().numpy()
        c = self.c.detach().cpu().double().numpy()
        J = self.J.detach().cpu().double().numpy()
        N = self.null_basis.detach().cpu().double().numpy()
        out = []
        for row in W:  # one small problem per preference (a cvxpy Parameter would recompile slowly here)
            t = cp.Variable()
            if penalty is None:  # z = N v: the lower level's solutions, the equality eliminated
                v = cp.Variable(N.shape[1])
                z = N @ v
            else:
                z = cp.Variable(c.shape[1])
            cons = [row[s] * (0.5 * cp.sum_squares(z - c[s]) - r[s]) <= t for s in range(self._S)]
            obj = t if penalty is None else t + 0.5 * penalty * cp.sum_squares(J @ z)
            prob = cp.Problem(cp.Minimize(obj), cons)
            prob.solve(solver=cp.CLARABEL)
            if prob.status != "optimal":
                raise RuntimeError(f"cvx_chebyshev: cvxpy returned {prob.status}")
            out.append(np.asarray(z.value, dtype=float).copy())
        return torch.tensor(np.stack(out), dtype=torch.float64)

    def optimistic_bilevel_solution(self) -> torch.Tensor:
        """``S = 1``: ``argmin ||z - c||^2 / 2`` over the lower-level solutions, ``(I - K^+ K) c``."""
        if self._S != 1:
            raise ValueError("optimistic_bilevel_solution: defined for S = 1")
        c = self.c[0]
        return c - torch.linalg.pinv(self.K) @ (self.K @ c)


def quadratic_mtbl(
    S: int = 2,
    seed: int = 0,
    *,
    m: int = 30,
    dy: int = 20,
    dx: int = 5,
    rank: int = 10,
    dtype: torch.dtype = torch.float64,
    device: Any = "cpu",
) -> QuadraticMTBL:
    """The quadratic instance of the spec (``rank = dy`` makes the lower level strongly convex).

    A seed draws ``A``, ``B`` and the targets ``a_s, b_s ~ N(0, I)`` (in float64, then cast).
    """
    S = check_int("S", S, minimum=1)
    m, dy, dx, rank = _check_dims(m, dy, dx, rank)
    gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    A, B = _lower_level(m, dy, dx, rank, gen)
    a = torch.randn(S, dy, generator=gen, dtype=torch.float64)
    b = torch.randn(S, dx, generator=gen, dtype=torch.float64)
    return QuadraticMTBL(*(t.to(dtype=dtype, device=device) for t in (A, B, a, b)))


class FonsecaFlemingMTBL(LinearLowerLevel):
    """Fonseca–Fleming tasks ``F_s = 1 - exp(-||z - a_s||^2)`` (S = 2) over the shared lower level.

    ``a`` is ``(2, dx + dy)`` with ``a[1] = -a[0]``, ``a[0] = c + n``: ``c`` (``feasible_direction``) a unit
    vector with ``J c = 0``, ``n`` orthogonal to the feasible subspace with ``||n|| = offset``.
    """

    def __init__(self, A: torch.Tensor, B: torch.Tensor, offset: float = 0.5) -> None:
        super().__init__(A, B, 2)
        if not (isinstance(offset, (int, float)) and math.isfinite(offset) and offset >= 0):
            raise ValueError(f"offset: must be a finite number >= 0, got {offset!r}")
        D = self.dx + self.dy
        ones = torch.full((D,), 1.0 / math.sqrt(D), dtype=A.dtype, device=A.device)
        N = self.null_basis
        v = N @ (N.T @ ones)
        c = v / v.norm()
        perp = ones - v
        n = perp / perp.norm() * offset
        self.offset = float(offset)
        self.feasible_direction = c
        self.a = torch.stack([c + n, -(c + n)])

    def objectives(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(..., 2)``."""
        z = torch.cat([x, y], -1).unsqueeze(-2)
        return 1.0 - torch.exp(-((z - self.a) ** 2).sum(-1))

    def first_order(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(F, gx, gy)`` sharing the exponentials."""
        z = torch.cat([x, y], -1).unsqueeze(-2)
        d = z - self.a
        e = torch.exp(-(d**2).sum(-1, keepdim=True))
        g = 2.0 * e * d
        return 1.0 - e.squeeze(-1), g[..., : self.dx], g[..., self.dx :]

    def first_order_z(self, z: torch.Tensor, dx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(F, G)`` with ``G_s = 2 exp(-||z - a_s||^2) (z - a_s)``."""
        d = z.unsqueeze(-2) - self.a
        e = torch.exp(-(d * d).sum(-1))
        return 1.0 - e, 2.0 * e.unsqueeze(-1) * d

    def objective_grads(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``2 exp(-||z - a_s||^2) (z - a_s)`` split into its ``x`` and ``y`` parts."""
        _, gx, gy = self.first_order(x, y)
        return gx, gy

    def front(self, t: torch.Tensor) -> torch.Tensor:
        """The exact bilevel front ``(..., 2)`` at ``z = t c``, ``t`` in [-1, 1]."""
        f1, f2 = fonseca_fleming_front(t, self.offset)
        return torch.stack([f1, f2], -1)

    def chebyshev_solution(self, preference: torch.Tensor) -> torch.Tensor:
        """The constrained Chebyshev point ``z = t c`` per row (``w_1 F_1 = w_2 F_2`` by bisection on t)."""
        w = preference.to(self.A).reshape(-1, 2)
        lo = torch.full((w.shape[0],), -1.0, dtype=self.A.dtype, device=self.A.device)
        hi = torch.ones_like(lo)
        for _ in range(200):  # w1 F1(t) - w2 F2(t) decreases in t
            mid = 0.5 * (lo + hi)
            f1, f2 = fonseca_fleming_front(mid, self.offset)
            pos = w[:, 0] * f1 - w[:, 1] * f2 > 0
            lo = torch.where(pos, mid, lo)
            hi = torch.where(pos, hi, mid)
        t = 0.5 * (lo + hi)
        return t.unsqueeze(-1) * self.feasible_direction


def fonseca_fleming_front(t: torch.Tensor, offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact front at ``z = t c``: ``(1 - e^{-o^2} e^{-(1 - t)^2}, 1 - e^{-o^2} e^{-(1 + t)^2})``."""
    u = math.exp(-(offset**2))
    return 1.0 - u * torch.exp(-((1.0 - t) ** 2)), 1.0 - u * torch.exp(-((1.0 + t) ** 2))


def fonseca_fleming_mtbl(
    seed: int = 0,
    *,
    offset: float = 0.5,
    m: int = 30,
    dy: int = 20,
    dx: int = 5,
    rank: int = 10,
    dtype: torch.dtype = torch.float64,
    device: Any = "cpu",
) -> FonsecaFlemingMTBL:
    """The non-convex-front instance (a seed draws ``A`` and ``B``; ``offset`` is ``||n||``)."""
    m, dy, dx, rank = _check_dims(m, dy, dx, rank)
    gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    A, B = _lower_level(m, dy, dx, rank, gen)
    return FonsecaFlemingMTBL(A.to(dtype=dtype, device=device), B.to(dtype=dtype, device=device), offset)
