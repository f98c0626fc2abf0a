r"""The federated baselines: FedAvg / local SGD (centralized or gossip) and SCAFFOLD, SPMD style.

Both are written against :class:`optarium.distributed.comm.Communicator` with the shared round machinery of
:mod:`optarium.distributed.rounds` (set-up, gradient noise, local SGD, recorded metrics, stopping rules),
take the arguments of :func:`optarium.distributed.dual_accelerated_local_sgd.dual_accelerated_local_sgd`
where they mean the same thing, and return a :class:`~optarium._core.result.Result`. Their conformance
cases (:func:`solver_cases`) join :mod:`optarium.testing.solvers`.
"""

from __future__ import annotations

from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.validation import check_int, check_nonnegative, check_positive
from optarium.distributed.federated import FederatedProblem
from optarium.distributed.rounds import (
    ConsensusMetrics,
    GradientNoise,
    check_mixing,
    federated_loop,
    local_sgd,
    setup_run,
)

__all__ = ["fedavg", "scaffold", "solver_cases"]


def fedavg(
    problem: FederatedProblem,
    comm: Any,
    rounds: int,
    local_steps: int,
    *,
    lr: float | None = None,
    server_lr: float = 1.0,
    W: torch.Tensor | None = None,
    noise_std: float = 0.0,
    seed: int = 0,
    x0: torch.Tensor | None = None,
    f_star: float | None = None,
    tol: float | None = None,
    record_every: int = 1,
    time_limit_s: float | None = None,
) -> Result:
    r"""FedAvg / Local SGD (McMahan et al., AISTATS 2017): T local SGD steps from the server model, then
    averaging.

    Round: :math:`y_m \leftarrow x`; T steps :math:`y_m \leftarrow y_m - \gamma \nabla F_m(y_m; \xi)`;
    :math:`x \leftarrow x + \eta_g \cdot \mathrm{mean}_m (y_m - x)` (one all-reduce). With a mixing matrix
    ``W`` it is decentralized local SGD: each client keeps its own :math:`x_m` and gossips
    :math:`X \leftarrow W Y` after its local steps (``server_lr`` must then be 1). Arguments as in
    :func:`~optarium.distributed.dual_accelerated_local_sgd.dual_accelerated_local_sgd`; ``lr`` defaults to
    :math:`1/(2L)`; ``time_limit_s`` is a budget of solver seconds (status ``timeout``).
    """
    rounds, clients, x, record_every = setup_run(problem, comm, rounds, x0, record_every)
    T = check_int("local_steps", local_steps, minimum=1)
    W = check_mixing(W, problem.n_clients)
    gamma = 1.0 / (2.0 * problem.L) if lr is None else check_positive("lr", lr)
    server_lr = check_positive("server_lr", server_lr)
    if W is not None and server_lr != 1.0:
        raise ValueError("server_lr: must be 1 in the decentralized form (W given)")
    noise_std = check_nonnegative("noise_std", noise_std)
    if tol is not None and f_star is None:
        raise ValueError("tol: needs f_star to measure the relative gap")
    noise = GradientNoise(
        noise_std, check_int("seed", seed, minimum=0), problem.n_clients, problem.dim, clients, x
    )
    X = x.expand(len(clients), -1).clone()
    W_ = None if W is None else W.to(dtype=X.dtype, device=X.device)
    metrics = ConsensusMetrics(problem, comm, clients, f_star)
    loop = federated_loop(comm, rounds, tol=tol, record_every=record_every, time_limit_s=time_limit_s, like=x)

    def evaluate(k: int) -> dict[str, float]:
        return metrics(X)

    for _ in loop.iterate(evaluate):
        Y = local_sgd(problem, X, clients, T, gamma, None, noise)
        if W_ is None:
            x = x + server_lr * comm.client_mean(Y - x)
            X = x.expand(len(clients), -1).clone()
        else:
            X = comm.gossip(Y, W_)
    with loop.evaluating(), comm.stats.paused():
        xbar = comm.client_mean(X)
    return loop.result(
        xbar,
        value=lambda: metrics.objective(xbar),
        extras={"X": X, "params": {"lr": gamma, "server_lr": server_lr}, "W": W, "comm": _stats(comm)},
    )


def scaffold(
    problem: FederatedProblem,
    comm: Any,
    rounds: int,
    local_steps: int,
    *,
    lr: float | None = None,
    server_lr: float = 1.0,
    noise_std: float = 0.0,
    seed: int = 0,
    x0: torch.Tensor | None = None,
    f_star: float | None = None,
    tol: float | None = None,
    record_every: int = 1,
    time_limit_s: float | None = None,
) -> Result:
    r"""SCAFFOLD (Karimireddy et al., ICML 2020), full participation, control variates of option II.

    Round: :math:`y_m \leftarrow x`; T steps
    :math:`y_m \leftarrow y_m - \gamma(\nabla F_m(y_m;\xi) - c_m + c)`;
    :math:`c_m^+ = c_m - c + (x - y_m)/(T\gamma)`; then one all-reduce of :math:`(y_m - x, c_m^+ - c_m)`:
    :math:`x \leftarrow x + \eta_g\,\mathrm{mean}_m(y_m - x)`,
    :math:`c \leftarrow c + \mathrm{mean}_m(c_m^+ - c_m)`.
    Each round sends 2d numbers up and 2d down per client. ``lr`` defaults to :math:`1/(2L)`; the other
    arguments as in :func:`fedavg`.
    """
    rounds, clients, x, record_every = setup_run(problem, comm, rounds, x0, record_every)
    T = check_int("local_steps", local_steps, minimum=1)
    gamma = 1.0 / (2.0 * problem.L) if lr is None else check_positive("lr", lr)
    server_lr = check_positive("server_lr", server_lr)
    noise_std = check_nonnegative("noise_std", noise_std)
    if tol is not None and f_star is None:
        raise ValueError("tol: needs f_star to measure the relative gap")
    noise = GradientNoise(
        noise_std, check_int("seed", seed, minimum=0), problem.n_clients, problem.dim, clients, x
    )
    X = x.expand(len(clients), -1).clone()
    c_loc = torch.zeros_like(X)
    c = torch.zeros_like(x)
    metrics = ConsensusMetrics(problem, comm, clients, f_star)
    loop = federated_loop(comm, rounds, tol=tol, record_every=record_every, time_limit_s=time_limit_s, like=x)

    def evaluate(k: int) -> dict[str, float]:
        return metrics(X)

    for _ in loop.iterate(evaluate):
        Y = local_sgd(problem, X, clients, T, gamma, c - c_loc, noise)
        c_new = c_loc - c + (x - Y) / (T * gamma)
        delta = comm.client_mean(torch.stack([Y - x, c_new - c_loc], 1))
        x = x + server_lr * delta[0]
        c = c + delta[1]
        c_loc = c_new
        X = x.expand(len(clients), -1).clone()
    return loop.result(
        x,
        value=lambda: metrics.objective(x),
        extras={"X": X, "c": c, "params": {"lr": gamma, "server_lr": server_lr}, "comm": _stats(comm)},
    )


def _stats(comm: Any) -> dict[str, float]:
    return comm.stats.as_dict()


def solver_cases() -> list[Any]:
    """The conformance cases of :func:`fedavg` and :func:`scaffold` (see :mod:`optarium.testing.solvers`)."""
    from optarium.distributed.federated import ridge_case

    return [
        ridge_case("fedavg", fedavg, local_steps=1, diverging={"lr": 1.0}),
        ridge_case("scaffold", scaffold, local_steps=5, diverging={"lr": 1.0}),
    ]
