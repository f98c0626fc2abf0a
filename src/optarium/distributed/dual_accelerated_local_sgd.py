r"""Accelerated dual ascent with multi-step local SGD (Accelerated GA-MSGD), and FedAvg / SCAFFOLD.

Paper: Junchi Yang, Murat Yildirim, Qiu Feng, "Accelerated Dual Method for Distributed Optimization: An
Inexact-Gradient View of Local Updates", ICML 2026 (poster 64733). The method is the strongly convex,
stochastic part of their arXiv:2407.02689, "Accelerating Distributed Optimization: A Primal-Dual Perspective
on Local Steps" ("(Accelerated) GA-MSGD").

Problem: :math:`\min_x \sum_{m=1}^M F_m(x)`, each :math:`F_m` :math:`\mu`-strongly convex and
:math:`L`-smooth. Consensus is the constraint :math:`AX = 0` on the stacked :math:`X = (x_1, \dots, x_M)`,
with :math:`A = (I - \tfrac1M \mathbf 1 \mathbf 1^\top) \otimes I` (centralized, a server averages) or
:math:`A = \sqrt{I - W} \otimes I` (decentralized, gossip with a mixing matrix :math:`W`). The method runs
(Nesterov-)accelerated gradient ascent on the dual of
:math:`\mathcal L(X, Y) = \sum_m F_m(x_m) + \langle Y, AX\rangle` and, for the inner minimisation,
``local_steps`` warm-started SGD steps per client (no communication). In the variable
:math:`\Lambda = A^\top Y` (client :math:`m` stores :math:`\lambda_m`; :math:`\sqrt{I-W}` is never formed),
one round is

.. math::

    x_m &\leftarrow x_m - \gamma\,(\nabla F_m(x_m; \xi) + \tilde\lambda_m)
        \quad (T \text{ times, local})\\
    r &= A^\top A X = X - \bar x \ \text{(one all-reduce)}
        \quad\text{or}\quad (I - W) X \ \text{(one gossip)}\\
    \lambda^+ &= \tilde\lambda + \eta\, r, \qquad
    \tilde\lambda \leftarrow \lambda^+ + \beta (\lambda^+ - \lambda), \qquad \lambda \leftarrow \lambda^+ .

:math:`r` is the exact dual gradient at :math:`\tilde\lambda` when the inner problem is solved exactly, and
an inexact one after :math:`T` warm-started SGD steps (the paper's inexact-gradient view).
:math:`\sum_m \lambda_m = 0` is invariant, and at the fixed point :math:`\lambda_m = -\nabla F_m(x^*)`, a
SCAFFOLD-like control variate, so heterogeneity causes no bias. ``accelerated=False`` (:math:`\beta = 0`)
is GA-MSGD, the non-accelerated method.

Parameters. Found in the paper (abstract, introduction): the structure above, the coupling
:math:`\sqrt{I - W}`, the dual confined to range(A) (hence strongly concave), convergence for any number
of local steps and :math:`O(\sqrt{\kappa}\log\frac1\epsilon)` rounds "when local computation is
sufficient". **Not found**: the :math:`T`-dependent dual step and momentum of the theorem (only the
abstract and introduction of the paper were reachable; no official code). The defaults are therefore ours
(the spec's, derived from standard duality):

- inner step :math:`\gamma = 1/(2L)`; dual step :math:`\eta = \mu / \lambda_{\max}(A^\top A)`
  (:math:`= 1/L_d` for the bound :math:`L_d = \lambda_{\max}(A^\top A)/\mu`; exact constants can be given);
- dual condition number :math:`\kappa_d = \kappa\,\lambda_{\max}(A^\top A)/\lambda^+_{\min}(A^\top A)` and
  Nesterov's :math:`\beta = (\sqrt{\kappa_d} - 1)/(\sqrt{\kappa_d} + 1)`, valid only for exact inner
  solves or :math:`T \ge T_{acc} = \lceil \ln\kappa_d / (\gamma\mu) \rceil` (then
  :math:`(1-\gamma\mu)^T \le 1/\kappa_d`); with fewer local steps this :math:`\beta` amplifies the inexact
  dual gradient and diverges (spectral radius of the round map > 1 at :math:`T \in \{1, 5, 20\}`,
  :math:`\kappa = 100`);
- ``momentum="auto"`` selects Nesterov's :math:`\beta` for exact solves or :math:`T \ge T_{acc}` and
  :math:`\beta = 0` (GA-MSGD, convergent for every :math:`T` in our checks) with a warning otherwise. This
  is the deviation from the paper: its small-:math:`T` schedule, which keeps acceleration for every
  :math:`T`, is unknown. A rule of our own, Nesterov's :math:`\beta` for
  :math:`\kappa_d(1 - (1-\gamma\mu)^T)`, was tried and rejected (it diverges at :math:`\kappa = 1000`,
  :math:`T \ge 50`), so none is offered.

Everything is SPMD against :class:`optarium.distributed.comm.Communicator`: a process holds the clients
``comm.local_clients`` stacked on the leading axis, all their local steps are one batched call, the
centralized form uses ``comm.client_mean`` and the decentralized form ``comm.gossip``. Stochastic
gradients use additive Gaussian noise drawn for all M clients from one seeded generator (each process keeps
its rows), so the iterates do not depend on how clients are split over processes. Evaluation (objective,
consensus) is excluded from the communication statistics.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from optarium._core.result import Result, Trace
from optarium._core.validation import (
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
)
from optarium.distributed.federated import FederatedProblem, client_index

__all__ = [
    "DualParameters",
    "dual_accelerated_local_sgd",
    "dual_parameters",
    "fedavg",
    "round_spectral_radius",
    "scaffold",
    "spmd_batch",
    "spmd_run",
]

_MOMENTA = ("auto", "nesterov", "none")


class DualParameters(dict):
    """The resolved parameters of one run (a dict): ``lr``, ``dual_lr``, ``beta``, ``kappa_d``, ``T_acc``,
    ``rule`` (how ``beta`` was chosen), ``lam_max`` and ``lam_min_plus`` of :math:`A^\\top A`."""


def _coupling_spectrum(W: torch.Tensor | None) -> tuple[float, float]:
    """(lambda_max, lambda_min^+) of A^T A: 1, 1 for the centralized projector; those of I - W otherwise."""
    if W is None:
        return 1.0, 1.0
    m = W.shape[0]
    ev = torch.linalg.eigvalsh(torch.eye(m, dtype=torch.float64) - W.detach().to("cpu", torch.float64))
    return float(ev[-1]), float(ev[1])


def _check_W(W: torch.Tensor | None, n_clients: int) -> torch.Tensor | None:
    if W is None:
        return None
    if not isinstance(W, torch.Tensor):
        raise TypeError(f"W: must be a torch.Tensor mixing matrix or None, got {type(W).__name__}")
    if W.shape != (n_clients, n_clients):
        raise ValueError(f"W: must have shape ({n_clients}, {n_clients}), got {tuple(W.shape)}")
    from optarium.distributed.topology import check_mixing_matrix

    check_mixing_matrix(W)
    return W


def dual_parameters(
    mu: float,
    L: float,
    local_steps: int,
    *,
    W: torch.Tensor | None = None,
    lr: float | None = None,
    dual_lr: float | None = None,
    kappa_d: float | None = None,
    momentum: str | float = "auto",
    accelerated: bool = True,
    exact_inner: bool = False,
    warn: bool = True,
) -> DualParameters:
    r"""Resolve the step sizes and momentum of :func:`dual_accelerated_local_sgd` (see the module docstring).

    Args:
        mu, L: per-client strong convexity and smoothness.
        local_steps: T, the local steps per round.
        W: mixing matrix (decentralized) or ``None`` (centralized).
        lr: inner step :math:`\gamma` (default :math:`1/(2L)`).
        dual_lr: dual step :math:`\eta` (default :math:`\mu/\lambda_{\max}(A^\top A)`).
        kappa_d: dual condition number for Nesterov's :math:`\beta` (default
            :math:`\kappa\,\lambda_{\max}/\lambda^+_{\min}` of :math:`A^\top A`); pass the exact one when
            known.
        momentum: ``"auto"``, ``"nesterov"``, ``"none"`` or a number in [0, 1).
        accelerated: ``False`` forces :math:`\beta = 0` (GA-MSGD).
        exact_inner: whether the inner problem is solved exactly (then ``local_steps`` is not used).
        warn: warn when ``"auto"`` falls back to :math:`\beta = 0`.
    """
    mu = check_positive("mu", mu)
    L = check_positive("L", L)
    if L < mu:
        raise ValueError(f"L: must be >= mu, got {L!r} < {mu!r}")
    T = check_int("local_steps", local_steps, minimum=1)
    lam_max, lam_min = _coupling_spectrum(W)
    if lam_min <= 1e-12:
        raise ValueError("W: the graph of the mixing matrix is disconnected (lambda_2(I - W) = 0)")
    gamma = 1.0 / (2.0 * L) if lr is None else check_positive("lr", lr)
    eta = mu / lam_max if dual_lr is None else check_positive("dual_lr", dual_lr)
    kd = (
        (L / mu) * lam_max / lam_min if kappa_d is None else check_in_range("kappa_d", kappa_d, 1.0, math.inf)
    )
    t_acc = max(1, math.ceil(math.log(kd) / (gamma * mu))) if kd > 1.0 else 1
    if isinstance(momentum, str):
        check_choice("momentum", momentum, _MOMENTA)
    else:
        momentum = check_in_range("momentum", momentum, 0.0, 1.0, high_inclusive=False)
    nesterov = (math.sqrt(kd) - 1.0) / (math.sqrt(kd) + 1.0)
    if not accelerated:
        if not (momentum in ("auto", "none") or momentum == 0.0):
            raise ValueError(
                f"momentum: must be 'auto', 'none' or 0 when accelerated=False, got {momentum!r}"
            )
        beta, rule = 0.0, "none (GA-MSGD)"
    elif momentum == "none":
        beta, rule = 0.0, "none"
    elif momentum == "nesterov":
        beta, rule = nesterov, "nesterov"
    elif momentum == "auto":
        if exact_inner or T >= t_acc:
            beta, rule = (
                nesterov,
                "auto: nesterov (exact inner solve)" if exact_inner else "auto: nesterov (T >= T_acc)",
            )
        else:
            beta, rule = 0.0, "auto: none (T < T_acc)"
            if warn:
                warnings.warn(
                    f"momentum='auto': local_steps={T} < T_acc={t_acc}, so beta = 0 (GA-MSGD); Nesterov's "
                    f"beta for exact inner solves can diverge with few local steps",
                    UserWarning,
                    stacklevel=3,
                )
    else:
        beta, rule = float(momentum), "given"
    return DualParameters(
        lr=gamma,
        dual_lr=eta,
        beta=beta,
        kappa_d=kd,
        T_acc=int(t_acc),
        rule=rule,
        lam_max=lam_max,
        lam_min_plus=lam_min,
    )


# ------------------------------------------------------------------------------------------------------------
# shared machinery


class _Noise:
    """Additive N(0, sigma^2) gradient noise drawn for all M clients (so it does not depend on the split)."""

    def __init__(
        self, sigma: float, seed: int, n_clients: int, dim: int, clients: torch.Tensor, like: torch.Tensor
    ):
        self.sigma = sigma
        self.shape = (n_clients, dim)
        self.clients = clients
        self.like = like
        self.gen = torch.Generator(device=like.device).manual_seed(seed) if sigma > 0 else None

    def __call__(self) -> torch.Tensor | None:
        if self.gen is None:
            return None
        z = torch.randn(self.shape, generator=self.gen, device=self.like.device, dtype=self.like.dtype)
        return self.sigma * z[self.clients]


def _setup(
    problem: FederatedProblem, comm: Any, rounds: int, x0: torch.Tensor | None, record_every: int
) -> tuple[int, torch.Tensor, torch.Tensor, int]:
    if not isinstance(problem, FederatedProblem):
        raise TypeError(
            "problem: must implement FederatedProblem (grad, loss, n_clients, dim, mu, L), "
            f"got {type(problem).__name__}"
        )
    rounds = check_int("rounds", rounds, minimum=0)
    record_every = check_int("record_every", record_every, minimum=1)
    if int(comm.n_clients) != int(problem.n_clients):
        raise ValueError(f"comm: has {comm.n_clients} clients, the problem {problem.n_clients}")
    like = _like(problem)
    clients = client_index(comm.local_clients, device=like.device)
    if x0 is None:
        x = torch.zeros(problem.dim, dtype=like.dtype, device=like.device)
    else:
        if not isinstance(x0, torch.Tensor) or x0.shape != (problem.dim,):
            raise ValueError(f"x0: must be a tensor of shape ({problem.dim},)")
        x = x0.detach().to(dtype=like.dtype, device=like.device)
    return rounds, clients, x, record_every


def _like(problem: Any) -> torch.Tensor:
    for name in ("c", "H", "x0"):
        t = getattr(problem, name, None)
        if isinstance(t, torch.Tensor):
            return t
    return torch.zeros((), dtype=torch.float64)


class _Recorder:
    """Per-round history: objective F at the consensus mean, relative gap, consensus error, bits."""

    def __init__(
        self, problem: Any, comm: Any, clients: torch.Tensor, f_star: float | None, tol: float | None
    ):
        self.problem, self.comm, self.clients = problem, comm, clients
        self.f_star, self.tol = f_star, tol
        self.rows: list[dict[str, float]] = []
        self.f0: float | None = None

    def objective(self, x: torch.Tensor) -> float:
        with self.comm.stats.paused():
            losses = self.problem.loss(x.expand(len(self.clients), -1), self.clients)
            return float(self.comm.client_sum(losses))

    def __call__(self, k: int, X: torch.Tensor, lam: torch.Tensor | None = None) -> tuple[float, str | None]:
        """Record round ``k`` for the stacked iterates ``X`` (and duals ``lam``); return (F, stop or None).

        Two collectives (the mean, then one sum of every per-client quantity), not charged to the statistics.
        """
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
            "step": k,
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
        self.rows.append(row)
        if not math.isfinite(f) or not math.isfinite(spread) or abs(f) > 1e12 * max(abs(self.f0), 1e-30):
            return f, "diverged"
        if self.tol is not None and "rel_gap" in row and row["rel_gap"] <= self.tol:
            return f, "converged"
        return f, None

    def trace(self) -> Trace:
        return Trace.from_rows(self.rows)


def _finish(
    recorder: _Recorder,
    status: str,
    n_iter: int,
    x: torch.Tensor,
    t0: float,
    comm: Any,
    extras: dict[str, Any],
) -> Result:
    value = recorder.objective(x)
    extras = {**extras, "comm": comm.stats.as_dict()}
    if not math.isfinite(value) and status != "diverged":
        status = "diverged"
    return Result(
        x=x,
        value=value if math.isfinite(value) else math.inf,
        status=status,
        n_iter=n_iter,
        history=recorder.trace(),
        wall_time_s=time.perf_counter() - t0,
        extras=extras,
    )


def _local_sgd(
    problem: FederatedProblem,
    X: torch.Tensor,
    clients: torch.Tensor,
    steps: int,
    lr: float,
    shift: torch.Tensor | None,
    noise: _Noise,
) -> torch.Tensor:
    """``steps`` SGD steps on F_m(x) + <shift_m, x> for every local client at once."""
    for _ in range(steps):
        g = problem.grad(X, clients)
        z = noise()
        if z is not None:
            g = g + z
        if shift is not None:
            g = g + shift
        X = X - lr * g
    return X


# ------------------------------------------------------------------------------------------------------------
# the method


def _dual_round(
    problem: FederatedProblem,
    clients: torch.Tensor,
    X: torch.Tensor,
    lam: torch.Tensor,
    lam_t: torch.Tensor,
    *,
    steps: int,
    lr: float,
    dual_lr: float,
    beta: float,
    exact_inner: bool,
    mix: Callable[[torch.Tensor], torch.Tensor],
    noise: _Noise,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One round: local phase at lam_t, one communication r = A^T A X, Nesterov step on the dual."""
    if exact_inner:
        X = problem.local_argmin(lam_t, clients)  # type: ignore[attr-defined]
    else:
        X = _local_sgd(problem, X, clients, steps, lr, lam_t, noise)
    r = mix(X)
    lam_new = lam_t + dual_lr * r
    lam_t = lam_new + beta * (lam_new - lam) if beta != 0.0 else lam_new
    return X, lam_new, lam_t


def dual_accelerated_local_sgd(
    problem: FederatedProblem,
    comm: Any,
    rounds: int,
    local_steps: int,
    *,
    lr: float | None = None,
    dual_lr: float | None = None,
    momentum: str | float = "auto",
    accelerated: bool = True,
    kappa_d: float | None = None,
    W: torch.Tensor | None = None,
    exact_inner: bool = False,
    noise_std: float = 0.0,
    seed: int = 0,
    x0: torch.Tensor | None = None,
    f_star: float | None = None,
    tol: float | None = None,
    record_every: int = 1,
) -> Result:
    r"""Accelerated dual ascent with ``local_steps`` local SGD steps per round (Accelerated GA-MSGD).

    Args:
        problem: a :class:`~optarium.distributed.federated.FederatedProblem` (``exact_inner`` also needs
            ``local_argmin``).
        comm: the :class:`~optarium.distributed.comm.Communicator` of this process (``Communicator.local(M)``
            for a single process).
        rounds: communication rounds R.
        local_steps: local steps T per round (ignored with ``exact_inner``).
        lr: inner step :math:`\gamma` (default :math:`1/(2L)`).
        dual_lr: dual step :math:`\eta` (default :math:`\mu/\lambda_{\max}(A^\top A)`).
        momentum: ``"auto"`` (Nesterov for exact solves or :math:`T \ge T_{acc}`, else 0 with a warning),
            ``"nesterov"``, ``"none"`` or a number in [0, 1).
        accelerated: ``False`` runs GA-MSGD (:math:`\beta = 0`).
        kappa_d: dual condition number for Nesterov's :math:`\beta` (default: the bound from ``mu``, ``L``,
            W).
        W: a mixing matrix (decentralized, gossip) or ``None`` (centralized, server averaging).
        exact_inner: solve the local problem exactly (quadratic problems) instead of T SGD steps.
        noise_std: standard deviation of the additive Gaussian gradient noise (0: exact gradients).
        seed: seeds the noise stream.
        x0: the common starting point (default 0).
        f_star: the optimal value, to record the relative gap :math:`(F(\bar x) - F^*)/(F(x_0) - F^*)`.
        tol: stop (``converged``) once the relative gap is at most ``tol`` (needs ``f_star``).
        record_every: record the history every this many rounds (and at the last one).

    Returns:
        :class:`~optarium._core.result.Result` with ``x`` the clients' mean, ``value`` :math:`F(x)`, the
        history
        (objective, rel_gap, consensus, bits per client) and ``extras``: this process's ``X`` and ``lam``
        blocks, the resolved parameters and the communication statistics.
    """
    t0 = time.perf_counter()
    rounds, clients, x, record_every = _setup(problem, comm, rounds, x0, record_every)
    W = _check_W(W, problem.n_clients)
    if exact_inner and not hasattr(problem, "local_argmin"):
        raise TypeError("exact_inner: the problem has no local_argmin")
    params = dual_parameters(
        problem.mu,
        problem.L,
        local_steps,
        W=W,
        lr=lr,
        dual_lr=dual_lr,
        kappa_d=kappa_d,
        momentum=momentum,
        accelerated=accelerated,
        exact_inner=exact_inner,
    )
    noise_std = check_nonnegative("noise_std", noise_std)
    seed = check_int("seed", seed, minimum=0)
    if tol is not None:
        tol = check_positive("tol", tol)
        if f_star is None:
            raise ValueError("tol: needs f_star to measure the relative gap")
    X = x.expand(len(clients), -1).clone()
    lam = torch.zeros_like(X)
    lam_t = torch.zeros_like(X)
    W_ = None if W is None else W.to(dtype=X.dtype, device=X.device)

    def mix(Z: torch.Tensor) -> torch.Tensor:
        return Z - (comm.client_mean(Z) if W_ is None else comm.gossip(Z, W_))

    noise = _Noise(noise_std, seed, problem.n_clients, problem.dim, clients, X)
    rec = _Recorder(problem, comm, clients, f_star, tol)
    _, stop = rec(0, X, lam)
    status, k = "max_iter", 0
    for k in range(1, rounds + 1):
        X, lam, lam_t = _dual_round(
            problem,
            clients,
            X,
            lam,
            lam_t,
            steps=int(local_steps),
            lr=params["lr"],
            dual_lr=params["dual_lr"],
            beta=params["beta"],
            exact_inner=exact_inner,
            mix=mix,
            noise=noise,
        )
        if k % record_every == 0 or k == rounds:
            _, stop = rec(k, X, lam)
        if stop is not None:
            status = stop
            break
    if rounds == 0 and stop is not None:
        status = stop
    with comm.stats.paused():
        xbar = comm.client_mean(X)
    return _finish(rec, status, k, xbar, t0, comm, {"X": X, "lam": lam, "params": dict(params), "W": W})


# ------------------------------------------------------------------------------------------------------------
# baselines


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
) -> Result:
    r"""FedAvg / Local SGD (McMahan et al., AISTATS 2017): T local SGD steps from the server model, then
    averaging.

    Round: :math:`y_m \leftarrow x`; T steps :math:`y_m \leftarrow y_m - \gamma \nabla F_m(y_m; \xi)`;
    :math:`x \leftarrow x + \eta_g \cdot \mathrm{mean}_m (y_m - x)` (one all-reduce). With a mixing matrix
    ``W``
    it is decentralized local SGD: each client keeps its own :math:`x_m` and gossips
    :math:`X \leftarrow W Y` after its local steps (``server_lr`` must then be 1). Arguments as in
    :func:`dual_accelerated_local_sgd`; ``lr`` defaults to :math:`1/(2L)`.
    """
    t0 = time.perf_counter()
    rounds, clients, x, record_every = _setup(problem, comm, rounds, x0, record_every)
    T = check_int("local_steps", local_steps, minimum=1)
    W = _check_W(W, problem.n_clients)
    gamma = 1.0 / (2.0 * problem.L) if lr is None else check_positive("lr", lr)
    server_lr = check_positive("server_lr", server_lr)
    if W is not None and server_lr != 1.0:
        raise ValueError("server_lr: must be 1 in the decentralized form (W given)")
    noise_std = check_nonnegative("noise_std", noise_std)
    if tol is not None and f_star is None:
        raise ValueError("tol: needs f_star to measure the relative gap")
    noise = _Noise(noise_std, check_int("seed", seed, minimum=0), problem.n_clients, problem.dim, clients, x)
    X = x.expand(len(clients), -1).clone()
    W_ = None if W is None else W.to(dtype=X.dtype, device=X.device)
    rec = _Recorder(problem, comm, clients, f_star, tol)
    _, stop = rec(0, X)
    status, k = "max_iter", 0
    for k in range(1, rounds + 1):
        Y = _local_sgd(problem, X, clients, T, gamma, None, noise)
        if W_ is None:
            x = x + server_lr * comm.client_mean(Y - x)
            X = x.expand(len(clients), -1).clone()
        else:
            X = comm.gossip(Y, W_)
        if k % record_every == 0 or k == rounds:
            _, stop = rec(k, X)
        if stop is not None:
            status = stop
            break
    with comm.stats.paused():
        xbar = comm.client_mean(X)
    return _finish(
        rec, status, k, xbar, t0, comm, {"X": X, "params": {"lr": gamma, "server_lr": server_lr}, "W": W}
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
) -> Result:
    r"""SCAFFOLD (Karimireddy et al., ICML 2020), full participation, control variates of option II.

    Round: :math:`y_m \leftarrow x`; T steps :math:`y_m \leftarrow y_m - \gamma(\nabla F_m(y_m;\xi) - c_m +
        c)`;
    :math:`c_m^+ = c_m - c + (x - y_m)/(T\gamma)`; then one all-reduce of :math:`(y_m - x, c_m^+ - c_m)`:
    :math:`x \leftarrow x + \eta_g\,\mathrm{mean}_m(y_m - x)`, :math:`c \leftarrow c +
    \mathrm{mean}_m(c_m^+ - c_m)`.
    Each round sends 2d numbers up and 2d down per client. ``lr`` defaults to :math:`1/(2L)`.
    """
    t0 = time.perf_counter()
    rounds, clients, x, record_every = _setup(problem, comm, rounds, x0, record_every)
    T = check_int("local_steps", local_steps, minimum=1)
    gamma = 1.0 / (2.0 * problem.L) if lr is None else check_positive("lr", lr)
    server_lr = check_positive("server_lr", server_lr)
    noise_std = check_nonnegative("noise_std", noise_std)
    if tol is not None and f_star is None:
        raise ValueError("tol: needs f_star to measure the relative gap")
    noise = _Noise(noise_std, check_int("seed", seed, minimum=0), problem.n_clients, problem.dim, clients, x)
    X = x.expand(len(clients), -1).clone()
    c_loc = torch.zeros_like(X)
    c = torch.zeros_like(x)
    rec = _Recorder(problem, comm, clients, f_star, tol)
    _, stop = rec(0, X)
    status, k = "max_iter", 0
    for k in range(1, rounds + 1):
        Y = _local_sgd(problem, X, clients, T, gamma, c - c_loc, noise)
        c_new = c_loc - c + (x - Y) / (T * gamma)
        delta = comm.client_mean(torch.stack([Y - x, c_new - c_loc], 1))
        x = x + server_lr * delta[0]
        c = c + delta[1]
        c_loc = c_new
        X = x.expand(len(clients), -1).clone()
        if k % record_every == 0 or k == rounds:
            _, stop = rec(k, X)
        if stop is not None:
            status = stop
            break
    return _finish(
        rec, status, k, x, t0, comm, {"X": X, "c": c, "params": {"lr": gamma, "server_lr": server_lr}}
    )


def spmd_run(
    comm: Any, method: str, problem: FederatedProblem, rounds: int, local_steps: int, **kwargs: Any
) -> dict[str, Any]:
    """Run ``method`` (``"dual"``, ``"fedavg"`` or ``"scaffold"``) on this rank; return a picklable summary.

    The entry point for :func:`optarium.distributed.launch` (``launch(spmd_run, world_size, "dual", problem,
    rounds, T, n_clients=M, **kwargs)``): every rank returns ``x``, ``value``, ``status``, ``n_iter``, the
    history rows, the resolved ``params``, the communication statistics and all clients' final ``X`` (and
    ``lam`` for the dual method), gathered without charging the statistics.
    """
    runners = {"dual": dual_accelerated_local_sgd, "fedavg": fedavg, "scaffold": scaffold}
    check_choice("method", method, tuple(runners))
    res = runners[method](problem, comm, rounds, local_steps, **kwargs)
    out: dict[str, Any] = {
        "x": res.x,
        "value": res.value,
        "status": res.status,
        "n_iter": res.n_iter,
        "history": res.history.as_rows(),
        "params": dict(res.extras.get("params", {})),
        "comm": dict(res.extras["comm"]),
    }
    with comm.stats.paused():
        out["X"] = comm.all_gather_clients(res.extras["X"])
        if "lam" in res.extras:
            out["lam"] = comm.all_gather_clients(res.extras["lam"])
    return out


def spmd_batch(comm: Any, jobs: list[tuple[str, Any, int, int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Run several ``(method, problem, rounds, local_steps, kwargs)`` jobs with :func:`spmd_run` on this rank.

    One :func:`~optarium.distributed.launch` of this function amortises the process start-up over many runs.
    """
    out = []
    for method, problem, rounds, steps, kwargs in jobs:
        comm.stats.reset()
        out.append(spmd_run(comm, method, problem, rounds, steps, **kwargs))
    return out


# ------------------------------------------------------------------------------------------------------------
# analysis


def round_spectral_radius(
    problem: FederatedProblem,
    local_steps: int,
    *,
    lr: float | None = None,
    dual_lr: float | None = None,
    momentum: str | float = "auto",
    accelerated: bool = True,
    kappa_d: float | None = None,
    W: torch.Tensor | None = None,
    exact_inner: bool = False,
) -> float:
    r"""Spectral radius of one deterministic round of the method, restricted to :math:`\sum_m \lambda_m = 0`.

    The round is an affine map of the state :math:`(X, \lambda, \tilde\lambda)` for a quadratic problem; its
    linear part (the Jacobian, computed by forward-mode differentiation of one round on a single process) is
    restricted to the invariant subspace where both dual blocks sum to zero. A radius below 1 means linear
    convergence; :math:`-1/\ln\rho` is the number of rounds per factor e.
    """
    W = _check_W(W, problem.n_clients)
    params = dual_parameters(
        problem.mu,
        problem.L,
        local_steps,
        W=W,
        lr=lr,
        dual_lr=dual_lr,
        kappa_d=kappa_d,
        momentum=momentum,
        accelerated=accelerated,
        exact_inner=exact_inner,
        warn=False,
    )
    like = _like(problem)
    m, d = problem.n_clients, problem.dim
    n = 3 * m * d
    # the round applied to n + 1 states at once (the basis vectors and 0): the clients of every state are
    # stacked on the leading axis, so the problem's batched gradient serves all of them in one call
    states = torch.cat([torch.eye(n, dtype=like.dtype, device=like.device), like.new_zeros((1, n))])
    b = states.shape[0]
    clients = torch.arange(m, device=like.device).repeat(b)
    W_ = None if W is None else W.to(dtype=like.dtype, device=like.device)

    def mix(Z: torch.Tensor) -> torch.Tensor:
        Zb = Z.reshape(b, m, d)
        avg = Zb.mean(1, keepdim=True) if W_ is None else torch.einsum("ij,bjk->bik", W_, Zb)
        return (Zb - avg).reshape(b * m, d)

    X, lam, lam_t = states.reshape(b, 3, m, d).unbind(1)
    out = _dual_round(
        problem,
        clients,
        X.reshape(b * m, d),
        lam.reshape(b * m, d),
        lam_t.reshape(b * m, d),
        steps=int(local_steps),
        lr=params["lr"],
        dual_lr=params["dual_lr"],
        beta=params["beta"],
        exact_inner=exact_inner,
        mix=mix,
        noise=_Noise(0.0, 0, m, d, clients, like),
    )
    images = torch.stack([o.reshape(b, m * d) for o in out], 1).reshape(b, n)
    J = (images[:-1] - images[-1]).T  # the affine round's linear part, column i = image of e_i
    # orthonormal basis of {X free, sum_m lam_m = 0, sum_m lam_t_m = 0}
    P = torch.eye(m, dtype=like.dtype, device=like.device) - 1.0 / m
    q, _ = torch.linalg.qr(P[:, : m - 1])
    Qd = torch.kron(q.contiguous(), torch.eye(d, dtype=like.dtype, device=like.device))  # (m d, (m-1) d)
    Ix = torch.eye(m * d, dtype=like.dtype, device=like.device)
    Q = torch.block_diag(Ix, Qd, Qd)
    Js = Q.T @ J @ Q
    return float(torch.linalg.eigvals(Js).abs().max())
