r"""Federated problems on stacked client parameters, and a heterogeneous ridge problem with a prescribed
spectrum.

A *federated problem* (:class:`FederatedProblem`) is a sum of client objectives
:math:`F(x) = \sum_{m=1}^M F_m(x)` that the SPMD algorithms of :mod:`optarium.distributed` query on stacked
parameters: ``X`` has shape ``(n_local, d)`` (one row per client held by this process) and ``clients`` holds
the global indices of those rows, so one batched call gives every local client's gradient (no loop over
clients).

:class:`HeterogeneousRidge` is the strongly convex problem used by the dual methods' tests and experiment:
quadratic clients :math:`F_m(x) = \tfrac12 (x - c_m)^\top H_m (x - c_m)` with
:math:`H_m = Q_m\,\mathrm{diag}(e_m)\,Q_m^\top`, :math:`Q_m` random orthogonal and the eigenvalues :math:`e_m`
log-uniform on :math:`[\mu, L]` with both end points included, so every client is exactly :math:`\mu`-strongly
convex and :math:`L`-smooth and :math:`\kappa = L/\mu` is known. This is ridge regression whose design Gram
matrices are :math:`H_m` (random features plus an :math:`\ell_2` weight would not fix :math:`\kappa`). The
optimum :math:`x^* = (\sum_m H_m)^{-1}\sum_m H_m c_m` and :math:`F^*` are closed form, and so are the exact
dual constants :math:`L_d, \mu_d` of the Lagrangian dual for a coupling matrix (centralized projector or
:math:`\sqrt{I-W}`), see :meth:`HeterogeneousRidge.dual_constants`.

:func:`ridge_case` is the conformance case (:mod:`optarium.testing.solvers`) of any federated solver
``solver(problem, comm, rounds, local_steps, **kwargs)`` on a small ridge problem; the dual method and the
baselines declare theirs with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from optarium._core.solver import SolverCase
from optarium._core.validation import check_int, check_positive

__all__ = [
    "FederatedProblem",
    "HeterogeneousRidge",
    "client_index",
    "make_heterogeneous_ridge",
    "ridge_case",
]


@runtime_checkable
class FederatedProblem(Protocol):
    """What the federated/decentralized algorithms need from a problem.

    Attributes:
        n_clients: number of clients M.
        dim: parameter dimension d.
        mu, L: per-client strong convexity and smoothness (the worst client's constants).
    """

    n_clients: int
    dim: int
    mu: float
    L: float

    def grad(self, X: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """Gradients ``(n, d)``: row i is :math:`\\nabla F_{clients[i]}(X[i])`."""
        ...

    def loss(self, X: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """Losses ``(n,)``: entry i is :math:`F_{clients[i]}(X[i])`."""
        ...


def client_index(clients: range | torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """Global client indices as a ``long`` tensor (from a ``range`` such as ``comm.local_clients``)."""
    if isinstance(clients, torch.Tensor):
        return clients.to(device=device, dtype=torch.long)
    return torch.arange(clients.start, clients.stop, clients.step, device=device, dtype=torch.long)


@dataclass(frozen=True)
class HeterogeneousRidge:
    r"""Quadratic clients :math:`F_m(x) = \tfrac12 (x - c_m)^\top H_m (x - c_m)`, :math:`F = \sum_m F_m`.

    Attributes:
        H: ``(M, d, d)`` symmetric positive definite client Hessians.
        c: ``(M, d)`` client optima.
        mu, L: :math:`\min_m \lambda_{\min}(H_m)` and :math:`\max_m \lambda_{\max}(H_m)` (computed).
    """

    H: torch.Tensor
    c: torch.Tensor
    mu: float = 0.0
    L: float = 0.0

    def __post_init__(self) -> None:
        H, c = self.H, self.c
        if H.ndim != 3 or H.shape[1] != H.shape[2]:
            raise ValueError(f"H: must have shape (M, d, d), got {tuple(H.shape)}")
        if c.shape != H.shape[:2]:
            raise ValueError(f"c: must have shape {tuple(H.shape[:2])}, got {tuple(c.shape)}")
        if not torch.allclose(H, H.transpose(1, 2), atol=1e-10 * float(H.abs().max())):
            raise ValueError("H: every client Hessian must be symmetric")
        ev = torch.linalg.eigvalsh(H)
        if float(ev.min()) <= 0:
            raise ValueError(f"H: must be positive definite, smallest eigenvalue {float(ev.min()):.3g}")
        object.__setattr__(self, "mu", float(ev.min()))
        object.__setattr__(self, "L", float(ev.max()))
        object.__setattr__(self, "_H_inv", torch.linalg.inv(H))

    @property
    def n_clients(self) -> int:
        """M."""
        return int(self.H.shape[0])

    @property
    def dim(self) -> int:
        """d."""
        return int(self.H.shape[1])

    @property
    def kappa(self) -> float:
        r""":math:`\kappa = L/\mu` of the worst client constants."""
        return self.L / self.mu

    def grad(self, X: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        r""":math:`H_m (x_m - c_m)` for the stacked rows ``X`` ``(n, d)`` of clients ``clients``."""
        return torch.bmm(self.H[clients], (X - self.c[clients]).unsqueeze(-1)).squeeze(-1)

    def loss(self, X: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        r""":math:`\tfrac12 (x_m - c_m)^\top H_m (x_m - c_m)` per row."""
        r = X - self.c[clients]
        return 0.5 * (r * torch.bmm(self.H[clients], r.unsqueeze(-1)).squeeze(-1)).sum(-1)

    def local_argmin(self, V: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        r"""Exact local solve per row: :math:`\arg\min_x F_m(x) + \langle v_m, x\rangle`.

        The minimiser is :math:`c_m - H_m^{-1} v_m`.
        """
        h_inv = self._H_inv[clients]  # type: ignore[attr-defined]
        return self.c[clients] - torch.bmm(h_inv, V.unsqueeze(-1)).squeeze(-1)

    def objective(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`F(x) = \sum_m F_m(x)` at one point ``x`` ``(d,)`` (or a batch ``(..., d)``)."""
        r = x.unsqueeze(-2) - self.c  # (..., M, d)
        return 0.5 * torch.einsum("...mi,mij,...mj->...", r, self.H, r)

    def optimum(self) -> tuple[torch.Tensor, float]:
        r""":math:`x^* = (\sum_m H_m)^{-1} \sum_m H_m c_m` and :math:`F^* = F(x^*)`."""
        hs = self.H.sum(0)
        x_star = torch.linalg.solve(hs, torch.einsum("mij,mj->i", self.H, self.c))
        return x_star, float(self.objective(x_star))

    def dual_constants(self, W: torch.Tensor | None = None) -> tuple[float, float]:
        r"""Exact :math:`(L_d, \mu_d)` of the dual :math:`d(Y) = \min_X \mathcal L(X, Y)` on range(A).

        The dual Hessian is :math:`-A\,\mathrm{blkdiag}(H_m^{-1})A^\top`; ``W=None`` takes the centralized
        coupling :math:`A = (I - \tfrac1M \mathbf 1\mathbf 1^\top) \otimes I_d`, a mixing matrix ``W`` takes
        :math:`A = \sqrt{I - W} \otimes I_d`. :math:`L_d` is its largest eigenvalue, :math:`\mu_d` its
        smallest on range(A) (dimension :math:`(M-1)d` for a connected graph).
        """
        m, d = self.n_clients, self.dim
        dt, dev = self.H.dtype, self.H.device
        if W is None:
            U = torch.eye(m, dtype=dt, device=dev) - torch.full((m, m), 1.0 / m, dtype=dt, device=dev)
        else:
            lam, vec = torch.linalg.eigh(torch.eye(m, dtype=dt, device=dev) - W.to(device=dev, dtype=dt))
            U = (vec * lam.clamp_min(0).sqrt()) @ vec.T
        A = torch.kron(U, torch.eye(d, dtype=dt, device=dev))
        B = torch.block_diag(*self._H_inv)  # type: ignore[attr-defined]
        ev = torch.linalg.eigvalsh(A @ B @ A.T)
        top = ev[-(m - 1) * d :]
        return float(top[-1]), float(top[0])


def make_heterogeneous_ridge(
    n_clients: int,
    dim: int,
    *,
    mu: float = 1.0,
    L: float = 10.0,
    center_std: float = 5.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> HeterogeneousRidge:
    r"""Draw a :class:`HeterogeneousRidge` with client spectra log-uniform on ``[mu, L]`` (end points
    included).

    Args:
        n_clients, dim: M and d (``dim >= 2`` so both end points fit).
        mu, L: every client's smallest and largest Hessian eigenvalue (so :math:`\kappa = L/\mu` exactly).
        center_std: the client optima are :math:`c_m \sim N(0, \texttt{center\_std}^2 I)` (heterogeneity).
        seed: seeds a private ``torch.Generator`` (the global RNG is untouched).
        dtype: floating dtype.
    """
    m = check_int("n_clients", n_clients, minimum=1)
    d = check_int("dim", dim, minimum=2)
    mu = check_positive("mu", mu)
    L = check_positive("L", L)
    if L < mu:
        raise ValueError(f"L: must be >= mu, got {L!r} < {mu!r}")
    center_std = check_positive("center_std", center_std)
    gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    lo, hi = math.log(mu), math.log(L)
    u = torch.rand(m, d - 2, generator=gen, dtype=dtype)
    logs = torch.cat(
        [torch.full((m, 1), lo, dtype=dtype), torch.full((m, 1), hi, dtype=dtype), lo + (hi - lo) * u], 1
    )
    e = logs.exp()
    e[:, 0], e[:, 1] = mu, L  # exact end points (exp(log(x)) need not round-trip)
    q, r = torch.linalg.qr(torch.randn(m, d, d, generator=gen, dtype=dtype))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    H = (q * e.unsqueeze(-2)) @ q.transpose(1, 2)
    H = 0.5 * (H + H.transpose(1, 2))
    c = center_std * torch.randn(m, d, generator=gen, dtype=dtype)
    return HeterogeneousRidge(H=H, c=c)


def ridge_case(
    name: str,
    solver: Callable[..., Any],
    *,
    local_steps: int,
    diverging: Mapping[str, Any],
    base: Mapping[str, Any] | None = None,
    tol: float = 1e-10,
) -> SolverCase:
    r"""The :class:`~optarium._core.solver.SolverCase` of a federated solver on a 4-client ridge problem.

    The problem is ``make_heterogeneous_ridge(4, 5, mu=1, L=10, seed=0)`` in the requested dtype and device,
    run on ``Communicator.local(4)`` for 40 rounds with ``f_star`` given; ``converged`` at ``tol`` on the
    relative gap (within 3000 rounds; checked again from :math:`F(x)` at the returned point), ``max_iter``
    after 7 rounds, ``diverged`` with the ``diverging`` overrides, ``timeout`` with ``time_limit_s=0``; the
    optimality residual is
    :math:`\|x - x^*\| / \max(\|x^*\|, 1)`; the determinism check turns on gradient noise.
    """
    from optarium.distributed.comm import Communicator

    ref = make_heterogeneous_ridge(4, 5, mu=1.0, L=10.0, seed=0)
    x_star, f_star = ref.optimum()
    f0 = float(ref.objective(torch.zeros(5, dtype=torch.float64)))

    def solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Any:
        p = (
            ref
            if dtype == torch.float64 and str(device) == "cpu"
            else HeterogeneousRidge(
                H=ref.H.to(device=device, dtype=dtype), c=ref.c.to(device=device, dtype=dtype)
            )
        )
        kw: dict[str, Any] = {"rounds": 40, "f_star": f_star, "seed": seed, **(base or {}), **overrides}
        rounds = kw.pop("rounds")
        return solver(p, Communicator.local(p.n_clients), rounds, local_steps, **kw)

    def gap(res: Any) -> float:
        f = float(ref.objective(torch.as_tensor(res.x).detach().to("cpu", torch.float64)))
        return (f - f_star) / (f0 - f_star)

    def distance(res: Any) -> float:
        x = torch.as_tensor(res.x).detach().to("cpu", torch.float64)
        return float((x - x_star).norm() / max(float(x_star.norm()), 1.0))

    return SolverCase(
        name=name,
        solve=solve,
        statuses={
            "converged": {"tol": tol, "rounds": 3000},
            "max_iter": {"rounds": 7},
            "diverged": dict(diverging),
            "timeout": {"time_limit_s": 0.0},
        },
        max_iter=7,
        tolerance_holds=lambda res: gap(res) <= tol * (1 + 1e-6) + 1e-14,
        optimality=distance,
        optimality_tol=1e-4,
        invalid=[
            ({"rounds": -1}, "rounds"),
            ({"lr": -1.0}, "lr"),
            ({"noise_std": -1.0}, "noise_std"),
            ({"seed": -1}, "seed"),
            ({"record_every": 0}, "record_every"),
            ({"tol": 1e-3, "f_star": None}, "tol"),
            ({"time_limit_s": -1.0}, "time_limit_s"),
            ({"x0": torch.zeros(3)}, "x0"),
        ],
        determinism={"noise_std": 0.5, "rounds": 10},
        stochastic=True,
    )
