r"""The round machinery the federated and decentralized solvers share: set-up, noise, local steps, metrics.

A federated solver of :mod:`optarium.distributed` is one SPMD function ``solver(problem, comm, rounds, ...)``
that returns a :class:`~optarium._core.result.Result`. It writes only its round; the rest comes from here:

- :func:`setup_run` validates the problem, ``rounds``, ``record_every``, the communicator and ``x0`` and
  returns this process's client indices and the starting point; :func:`check_mixing` validates a mixing
  matrix;
- :class:`GradientNoise`: additive Gaussian gradient noise drawn for all M clients from one seeded
  generator (each process keeps its rows), so the iterates do not depend on how clients are split over
  processes;
- :func:`local_sgd`: T batched SGD steps of every local client on :math:`F_m(x) + \langle s_m, x\rangle`;
- :class:`ConsensusMetrics`: the recorded row of a round (objective :math:`F(\bar x)` at the clients'
  mean, relative gap :math:`(F(\bar x) - F^*)/(F(x_0) - F^*)` when :math:`F^*` is known, consensus error
  :math:`\sum_m \|x_m - \bar x\|^2`, uplink/downlink bits per client, communication rounds, and
  :math:`\max|\sum_m \lambda_m|` for dual methods), computed with two collectives that are not charged to
  the communication statistics;
- :func:`federated_loop`: the :class:`~optarium._core.solver.SolverLoop` with the federated stopping rules
  (converged once the relative gap is at most ``tol``; diverged when the objective or the consensus error
  is not finite or the objective exceeds :math:`10^{12}\max(|F(x_0)|, 10^{-30})`; ``max_iter`` after
  ``rounds``; ``timeout`` after ``time_limit_s`` solver seconds, agreed by all ranks with one all-reduce per
  round, only when a time budget is set).

A round loop is then (see :func:`optarium.distributed.baselines.fedavg`)::

    rounds, clients, x, record_every = setup_run(problem, comm, rounds, x0, record_every)
    metrics = ConsensusMetrics(problem, comm, clients, f_star)
    loop = federated_loop(comm, rounds, tol=tol, record_every=record_every, time_limit_s=time_limit_s, like=x)
    for _ in loop.iterate(lambda k: metrics(X)):  # reads the current X
        X = ...  # one round
    return loop.result(xbar, value=lambda: metrics.objective(xbar), extras={...})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from optarium._core.solver import SolverLoop
from optarium._core.validation import check_int
from optarium.distributed.federated import FederatedProblem, client_index

__all__ = [
    "ConsensusMetrics",
    "GradientNoise",
    "check_mixing",
    "federated_loop",
    "like_tensor",
    "local_sgd",
    "rank_agreement",
    "setup_run",
]


class GradientNoise:
    """Additive :math:`N(0, \\sigma^2)` gradient noise for all M clients (so it does not depend on the split).

    Each call draws an ``(n_clients, dim)`` block from one generator seeded with ``seed`` (on the device of
    ``like``) and returns the rows of this process's ``clients``; ``None`` when ``sigma`` is 0.
    """

    def __init__(
        self, sigma: float, seed: int, n_clients: int, dim: int, clients: torch.Tensor, like: torch.Tensor
    ) -> None:
        self.sigma = sigma
        self.shape = (n_clients, dim)
        self.clients = clients
        self.like = like
        self.gen = torch.Generator(device=like.device).manual_seed(seed) if sigma > 0 else None

    def __call__(self) -> torch.Tensor | None:
        """The next noise rows ``(n_local, dim)``, or ``None`` without noise."""
        if self.gen is None:
            return None
        z = torch.randn(self.shape, generator=self.gen, device=self.like.device, dtype=self.like.dtype)
        return self.sigma * z[self.clients]


def like_tensor(problem: Any) -> torch.Tensor:
    """A tensor of the problem's dtype and device (its ``c``, ``H`` or ``x0``; else float64 on the CPU)."""
    for name in ("c", "H", "x0"):
        t = getattr(problem, name, None)
        if isinstance(t, torch.Tensor):
            return t
    return torch.zeros((), dtype=torch.float64)


def setup_run(
    problem: FederatedProblem, comm: Any, rounds: int, x0: torch.Tensor | None, record_every: int
) -> tuple[int, torch.Tensor, torch.Tensor, int]:
    """Validate the common arguments; return ``(rounds, clients, x, record_every)``.

    ``clients`` holds this process's global client indices, ``x`` the starting point (``x0``, default 0) in
    the problem's dtype and device.
    """
    if not isinstance(problem, FederatedProblem):
        raise TypeError(
            "problem: must implement FederatedProblem (grad, loss, n_clients, dim, mu, L), "
            f"got {type(problem).__name__}"
        )
    rounds = check_int("rounds", rounds, minimum=0)
    record_every = check_int("record_every", record_every, minimum=1)
    if int(comm.n_clients) != int(problem.n_clients):
        raise ValueError(f"comm: has {comm.n_clients} clients, the problem {problem.n_clients}")
    like = like_tensor(problem)
    clients = client_index(comm.local_clients, device=like.device)
    if x0 is None:
        x = torch.zeros(problem.dim, dtype=like.dtype, device=like.device)
    else:
        if not isinstance(x0, torch.Tensor) or x0.shape != (problem.dim,):
            raise ValueError(f"x0: must be a tensor of shape ({problem.dim},)")
        x = x0.detach().to(dtype=like.dtype, device=like.device)
    return rounds, clients, x, record_every


def check_mixing(W: torch.Tensor | None, n_clients: int) -> torch.Tensor | None:
    """``W`` if it is a valid ``(n_clients, n_clients)`` mixing matrix (or ``None``); errors name ``W``."""
    if W is None:
        return None
    if not isinstance(W, torch.Tensor):
        raise TypeError(f"W: must be a torch.Tensor mixing matrix or None, got {type(W).__name__}")
    if W.shape != (n_clients, n_clients):
        raise ValueError(f"W: must have shape ({n_clients}, {n_clients}), got {tuple(W.shape)}")
    from optarium.distributed.topology import check_mixing_matrix

    check_mixing_matrix(W)
    return W


def local_sgd(
    problem: FederatedProblem,
    X: torch.Tensor,
    clients: torch.Tensor,
    steps: int,
    lr: float,
    shift: torch.Tensor | None,
    noise: GradientNoise,
) -> torch.Tensor:
    r"""``steps`` SGD steps on :math:`F_m(x) + \langle s_m, x\rangle` for every local client at once.

    Each step is :math:`x_m \leftarrow x_m - \gamma(\nabla F_m(x_m) + \xi_m + s_m)` with the noise
    :math:`\xi` of ``noise`` and the shift rows ``shift`` (``None``: no shift).
    """
    for _ in range(steps):
        g = problem.grad(X, clients)
        z = noise()
        if z is not None:
            g = g + z
        if shift is not None:
            g = g + shift
        X = X - lr * g
    return X


class ConsensusMetrics:
    """The recorded row of a federated round, and the final objective (both excluded from the statistics).

    ``metrics(X)`` (or ``metrics(X, lam)`` for a dual method) returns ``objective`` (:math:`F(\\bar x)`),
    ``consensus`` (:math:`\\sum_m \\|x_m - \\bar x\\|^2`), ``uplink_bits`` and ``downlink_bits`` per client,
    ``comm_rounds``, then ``dual_sum`` (:math:`\\max|\\sum_m \\lambda_m|`, with ``lam``) and ``rel_gap``
    (with ``f_star``, relative to the first call's objective). Two collectives: the mean, then one sum of
    every per-client quantity.
    """

    def __init__(self, problem: Any, comm: Any, clients: torch.Tensor, f_star: float | None) -> None:
        self.problem, self.comm, self.clients = problem, comm, clients
        self.f_star = f_star
        self.f0: float | None = None

    def objective(self, x: torch.Tensor) -> float:
        """:math:`F(x) = \\sum_m F_m(x)` at one point ``x`` (one uncharged client sum)."""
        with self.comm.stats.paused():
            losses = self.problem.loss(x.expand(len(self.clients), -1), self.clients)
            return float(self.comm.client_sum(losses))

    def __call__(self, X: torch.Tensor, lam: torch.Tensor | None = None) -> dict[str, float]:
        """The row of metrics for the stacked iterates ``X`` (and duals ``lam``)."""
        st = self.comm.stats
        n_comm = float(max(st.uplink_rounds, st.downlink_rounds))
        bits = torch.stack([st.uplink_bits, st.downlink_bits], -1).to(X) / self.comm.n_clients
        with self.comm.stats.paused():
            xbar = self.comm.client_mean(X)
            parts = [
                self.problem.loss(xbar.expand(len(self.clients), -1), self.clients).unsqueeze(-1),
                ((X - xbar) ** 2).sum(-1, keepdim=True),
                bits,
            ]
            if lam is not None:
                parts.append(lam)
            tot = self.comm.client_sum(torch.cat(parts, -1))
        f, spread, up, down = (float(v) for v in tot[:4])
        row = {
            "objective": f,
            "consensus": spread,
            "uplink_bits": up,
            "downlink_bits": down,
            "comm_rounds": n_comm,
        }
        if lam is not None:
            row["dual_sum"] = float(tot[4:].abs().max())
        if self.f0 is None:
            self.f0 = f
        if self.f_star is not None:
            row["rel_gap"] = (f - self.f_star) / max(self.f0 - self.f_star, 1e-300)
        return row


def rank_agreement(comm: Any, like: torch.Tensor) -> Callable[[bool], bool]:
    """``agree(flag)``: whether ``flag`` holds on any rank (an uncharged all-reduce; local at world size 1).

    Used for the time-budget flag of SPMD solvers (see :func:`federated_loop`).
    """

    def agree(flag: bool) -> bool:
        if not comm.distributed:
            return flag
        with comm.stats.paused():
            t = torch.tensor([1.0 if flag else 0.0], dtype=like.dtype, device=like.device)
            return bool(float(comm.all_reduce(t, "max")[0]) > 0.0)

    return agree


def federated_loop(
    comm: Any,
    rounds: int,
    *,
    tol: float | None,
    record_every: int,
    time_limit_s: float | None,
    like: torch.Tensor,
) -> SolverLoop:
    """The :class:`~optarium._core.solver.SolverLoop` of a federated solver (rules: the module docstring)."""
    return SolverLoop(
        rounds,
        tol=tol,
        criterion="rel_gap",
        record_every=record_every,
        time_limit_s=time_limit_s,
        objective="objective",
        blowup=1e12,
        blowup_floor=1e-30,
        watch=("objective", "consensus"),
        agree=rank_agreement(comm, like),
    )
