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

Where the pieces live: this module holds the method (:func:`dual_parameters`,
:func:`dual_accelerated_local_sgd`, :func:`round_spectral_radius`); the baselines FedAvg and SCAFFOLD are in
:mod:`optarium.distributed.baselines`; the shared round machinery (set-up, gradient noise, local SGD, the
recorded metrics and the stopping rules on :class:`optarium._core.solver.SolverLoop`) in
:mod:`optarium.distributed.rounds`; the SPMD entry points for :func:`optarium.distributed.launch`
(:func:`~optarium.distributed.spmd.spmd_run`, :func:`~optarium.distributed.spmd.spmd_batch`) in
:mod:`optarium.distributed.spmd`. :func:`solver_cases` declares the method's conformance case.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.validation import (
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
)
from optarium.distributed.federated import FederatedProblem
from optarium.distributed.rounds import (
    ConsensusMetrics,
    GradientNoise,
    check_mixing,
    federated_loop,
    like_tensor,
    local_sgd,
    setup_run,
)

__all__ = [
    "DualParameters",
    "dual_accelerated_local_sgd",
    "dual_parameters",
    "round_spectral_radius",
    "solver_cases",
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
    noise: GradientNoise,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One round: local phase at lam_t, one communication r = A^T A X, Nesterov step on the dual."""
    if exact_inner:
        X = problem.local_argmin(lam_t, clients)  # type: ignore[attr-defined]
    else:
        X = local_sgd(problem, X, clients, steps, lr, lam_t, noise)
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
    time_limit_s: float | None = None,
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
        time_limit_s: a budget of solver seconds (evaluation excluded; status ``timeout``), agreed by all
            ranks.

    Returns:
        :class:`~optarium._core.result.Result` with ``x`` the clients' mean, ``value`` :math:`F(x)`, the
        history (objective, rel_gap, consensus, bits per client, dual_sum) and ``extras``: this process's
        ``X`` and ``lam`` blocks, the resolved parameters and the communication statistics. The stopping
        rules are those of :func:`optarium.distributed.rounds.federated_loop`.
    """
    rounds, clients, x, record_every = setup_run(problem, comm, rounds, x0, record_every)
    W = check_mixing(W, problem.n_clients)
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

    noise = GradientNoise(noise_std, seed, problem.n_clients, problem.dim, clients, X)
    metrics = ConsensusMetrics(problem, comm, clients, f_star)
    loop = federated_loop(comm, rounds, tol=tol, record_every=record_every, time_limit_s=time_limit_s, like=X)

    def evaluate(k: int) -> dict[str, float]:
        return metrics(X, lam)

    for _ in loop.iterate(evaluate):
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
    with loop.evaluating(), comm.stats.paused():
        xbar = comm.client_mean(X)
    extras = {"X": X, "lam": lam, "params": dict(params), "W": W, "comm": comm.stats.as_dict()}
    return loop.result(xbar, value=lambda: metrics.objective(xbar), extras=extras)


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
    W = check_mixing(W, problem.n_clients)
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
    like = like_tensor(problem)
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
        noise=GradientNoise(0.0, 0, m, d, clients, like),
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


def solver_cases() -> list[Any]:
    """The conformance case of :func:`dual_accelerated_local_sgd` (see :mod:`optarium.testing.solvers`).

    T = T_acc local steps on the 4-client ridge problem of :func:`optarium.distributed.federated.ridge_case`
    (so ``momentum="auto"`` selects Nesterov's beta, without a warning); an inner step of 1 > 2/L diverges.
    """
    from optarium.distributed.federated import ridge_case

    t_acc = int(dual_parameters(1.0, 10.0, 1, warn=False)["T_acc"])
    case = ridge_case(
        "dual-accelerated-local-sgd", dual_accelerated_local_sgd, local_steps=t_acc, diverging={"lr": 1.0}
    )
    return [case]
