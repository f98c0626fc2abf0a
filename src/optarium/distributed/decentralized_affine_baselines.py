r"""Tracking-ADMM and DPMM: the constraint-coupled baselines of the mixed-affine experiment.

Both solve a *constraint-coupled* problem, :math:`\min\sum_i f_i(z_i)` s.t. :math:`\sum_i (A'_iz_i -
b'_i) = 0`, :math:`z_i\in X_i` (local sets), with an exact local solve per iteration (a proximal oracle, not a
gradient oracle) and one gossip round per iteration.

- **Tracking-ADMM**: Falsone, Notarnicola, Notarstefano, Prandini, "Tracking-ADMM for distributed
  constraint-coupled optimization", Automatica 2020 (arXiv:1907.10860). With a doubly stochastic mixing
  matrix :math:`M` and penalty :math:`c > 0`, from :math:`d_i^0 = A'_iz_i^0 - b'_i`, :math:`\lambda_i^0 = 0`:

  .. math::

      z_i^{k+1} &= \arg\min_{z\in X_i} f_i(z) + (M\lambda^k)_i^\top A'_iz
                   + \tfrac c2\|A'_i(z - z_i^k) + (Md^k)_i\|^2,\\
      d_i^{k+1} &= (Md^k)_i + A'_i(z_i^{k+1} - z_i^k),\qquad
      \lambda_i^{k+1} = (M\lambda^k)_i + c\,d_i^{k+1}.

  (read in the paper's abstract and in the public code of the predecessor paper, Yarmoshik et al. 2025,
  ``kisnikser/Decentralized-Optimization``; default :math:`c = 10^{-3}`, the predecessor's default.)
  One gossip round per iteration: :math:`M\lambda^k` and :math:`Md^k` travel in one stacked payload.
- **DPMM**: Gong, Zhang (?), "Decentralized Proximal Method of Multipliers for Convex Optimization with
  Coupled Constraints" (arXiv:2310.15596). With the gossip matrix :math:`L = W` (PSD, kernel = consensus),
  :math:`\theta_i\in(0,2)`, :math:`\alpha_i, \gamma_i > 0`, :math:`0 < \beta < 1/(\gamma\lambda_{\max}(L))`,
  from :math:`z = y = \Lambda = 0`:

  .. math::

      \tilde y &= y - \gamma\Lambda,\quad
      \hat z_i = \arg\min_{z\in X_i} f_i(z) + \tilde y_i^\top(A'_iz - b'_i)
                 + \tfrac{\gamma}2\|A'_iz - b'_i\|^2 + \tfrac1{2\alpha}\|z - z_i\|^2,\\
      \hat y &= \tilde y + \gamma(A'\hat z - b'),\quad z \leftarrow (1-\theta)z + \theta\hat z,\quad
      \Lambda^+ = \Lambda + \beta L\hat y,\quad y \leftarrow \hat y + \gamma(\Lambda - \Lambda^+).

  The update and the defaults :math:`\theta = \alpha = \gamma = 1`, :math:`\beta = 1/(2\gamma
  \lambda_{\max}(L))` are those of the predecessor's public implementation (the DPMM paper's abstract was
  read, its algorithm box not); one gossip round per iteration (:math:`L\hat y`).

**Reconstructed: casting the mixed problem as a constraint-coupled one.** Node :math:`i` holds
:math:`z_i = (x_i, \tilde x_i)` (its own copy of the global variable), the local set :math:`X_i = \{C_ix_i =
c_i,\ \tilde C_i\tilde x_i = \tilde c_i\}` (handled exactly inside the local solve, a batched KKT system),
and the coupled rows :math:`A'_iz_i = (A_ix_i,\ (e_i^\top B\otimes I_{\tilde d})\tilde x_i)`,
:math:`b'_i = (b_i, 0)`, where :math:`B` is the edge-node incidence matrix of the graph of ``W`` (one row
:math:`\tilde x_j - \tilde x_k` per edge :math:`j<k`): :math:`\sum_iA'_iz_i = \sum_ib_i` is the coupled
constraint plus consensus of the copies, and node :math:`i` only needs its incident edges. The coupled
dimension is :math:`m + |E|\tilde d`. The predecessor ran both methods on coupled-only problems; the paper's
own mixed-case set-up of these baselines was not read. The mixing matrix of Tracking-ADMM is :math:`M = I -
W` (the Metropolis matrix when ``W = I - mixing_matrix(...)``).

The local solves use a KKT matrix that does not change between iterations; it is inverted once at set-up
(batched over nodes; rows of :math:`\tilde C_i` that are zero get a unit diagonal so the system stays
regular and their multiplier stays 0). Since every step is then affine in the node's state and its gossip
result, the whole local update is one precomputed ``(state, mixed) -> state`` matrix per node, applied by
one batched product per iteration. ``grad_calls`` counts local solves (one per node per iteration: the
experiment reports them apart from gradient calls of the gradient methods).

SPMD against the :class:`~optarium.distributed.comm.Communicator`: a process holds ``comm.local_clients``;
the only communication is ``comm.gossip``; monitoring runs inside ``comm.stats.paused()``.
:func:`spmd_solve` runs jobs of these methods and of
:func:`~optarium.distributed.decentralized_affine.solve_mixed_affine` (dispatch on ``method``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_positive
from optarium.distributed.decentralized_affine import (
    InfeasibleProblemError,
    MixedAffineProblem,
    _bmv,
    check_gossip_matrix,
    mixed_affine_setup,
    spmd_solve,
)

__all__ = ["BASELINES", "coupled_form", "solve_coupled_baseline", "solver_cases", "spmd_solve"]

BASELINES = ("tracking-admm", "dpmm")


def _edges(W: torch.Tensor) -> torch.Tensor:
    """Edges ``(E, 2)`` (``j < k``) of the graph of ``W`` (off-diagonal nonzeros)."""
    nz = (W != 0).clone()
    nz.fill_diagonal_(False)
    return torch.nonzero(torch.triu(nz, 1))


def coupled_form(problem: MixedAffineProblem, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The coupled rows ``(A' (n, m + |E| dt, d + dt), b' (n, m + |E| dt))`` of the reformulation."""
    n, d, dt, m = problem.n, problem.d, problem.dt, problem.m
    like = problem.H
    E = _edges(W.detach().to("cpu"))
    ne = int(E.shape[0])
    Bi = torch.zeros(n, ne, dtype=like.dtype, device=like.device)  # incidence, node-major
    if ne:
        idx = torch.arange(ne, device=like.device)
        Bi[E[:, 0].to(like.device), idx] = 1.0
        Bi[E[:, 1].to(like.device), idx] = -1.0
    eye = torch.eye(dt, dtype=like.dtype, device=like.device)
    S = (Bi[:, :, None, None] * eye).reshape(n, ne * dt, dt)  # (e_i^T B kron I) as (|E| dt, dt)
    top = torch.cat([problem.A, like.new_zeros(n, m, dt)], 2)
    bot = torch.cat([like.new_zeros(n, ne * dt, d), S], 2)
    Ap = torch.cat([top, bot], 1)
    bp = torch.cat([problem.b, like.new_zeros(n, ne * dt)], 1)
    return Ap, bp


def _local_constraints(problem: MixedAffineProblem) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(E_i (n, r + rt, p), e_i, zero-row mask)`` of the local sets :math:`X_i`."""
    n, d, dt = problem.n, problem.d, problem.dt
    like = problem.H
    Ei = torch.cat(
        [
            torch.cat([problem.C, like.new_zeros(n, problem.r, dt)], 2),
            torch.cat([like.new_zeros(n, problem.rt, d), problem.Ct], 2),
        ],
        1,
    )
    ei = torch.cat([problem.c, problem.ct], 1)
    zero = Ei.abs().sum(-1) == 0
    return Ei, ei, zero


def _kkt_inverse(Q: torch.Tensor, Ei: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """Inverse of ``[[Q, E^T], [E, -D]]`` per node (``D`` = 1 on zero rows of ``E``)."""
    n, p, _ = Q.shape
    q = Ei.shape[1]
    K = Q.new_zeros(n, p + q, p + q)
    K[:, :p, :p] = Q
    K[:, :p, p:] = Ei.transpose(1, 2)
    K[:, p:, :p] = Ei
    K[:, p:, p:] = -torch.diag_embed(zero.to(Q.dtype))
    return torch.linalg.inv(K)


def solve_coupled_baseline(
    problem: MixedAffineProblem,
    comm: Any,
    W: torch.Tensor,
    *,
    method: str = "tracking-admm",
    max_iter: int = 10_000,
    tol: float | None = None,
    x_star: tuple[torch.Tensor, torch.Tensor] | None = None,
    max_rounds: int | None = None,
    c: float = 1e-3,
    theta: float = 1.0,
    alpha: float = 1.0,
    gamma: float = 1.0,
    beta: float | None = None,
    record_every: int = 1,
    time_limit_s: float | None = None,
) -> Result:
    r"""Run Tracking-ADMM or DPMM (:data:`BASELINES`) on this rank's nodes of the mixed problem.

    Args:
        problem, comm, W: as for :func:`~optarium.distributed.decentralized_affine.solve_mixed_affine`.
        method: ``"tracking-admm"`` or ``"dpmm"``.
        max_iter, tol, x_star, max_rounds, record_every, time_limit_s: as for ``solve_mixed_affine``
            (the criterion is ``rel_err`` with ``x_star``, else ``residual``).
        c: Tracking-ADMM's penalty (default ``1e-3``, the predecessor's).
        theta, alpha, gamma, beta: DPMM's relaxation in ``(0, 2)``, proximal weight, penalty and dual step
            in ``(0, 1/(gamma lambda_max(W)))`` (default half the bound).

    Returns:
        :class:`Result` with ``x = {"x": X, "xt": Xt}`` (this rank's rows), history rows (objective, residual
        of the original constraints, rel_err, gossip_rounds, uplink_bits, grad_calls = local solves,
        k_products = 0) and ``extras``: the stacked ``U = (x, 0, xt)`` block, ``setup`` (the problem's
        constants as :func:`mixed_affine_setup` gives them for plain APAPC, plus this method's parameters)
        and the communication statistics.

    Raises:
        InfeasibleProblemError: the constraints are inconsistent.
    """
    from optarium.distributed.rounds import rank_agreement

    if not isinstance(problem, MixedAffineProblem):
        raise TypeError(f"problem: must be a MixedAffineProblem, got {type(problem).__name__}")
    if int(comm.n_clients) != problem.n:
        raise ValueError(f"comm: has {comm.n_clients} clients, the problem {problem.n} nodes")
    check_choice("method", method, BASELINES)
    max_iter = check_int("max_iter", max_iter, minimum=0)
    record_every = check_int("record_every", record_every, minimum=1)
    if max_rounds is not None:
        max_rounds = check_int("max_rounds", max_rounds, minimum=1)
    if tol is not None:
        tol = check_positive("tol", tol)
    c = check_positive("c", c)
    theta = check_positive("theta", theta)
    if theta >= 2:
        raise ValueError(f"theta: must lie in (0, 2), got {theta}")
    alpha = check_positive("alpha", alpha)
    gamma = check_positive("gamma", gamma)
    check_gossip_matrix(W, problem.n)
    if x_star is not None:
        if not (isinstance(x_star, (tuple, list)) and len(x_star) == 2):
            raise TypeError("x_star: must be a pair (X* (n, d), xt* (dt,))")
        if tuple(x_star[0].shape) != (problem.n, problem.d) or tuple(x_star[1].shape) != (problem.dt,):
            raise ValueError(f"x_star: shapes must be ({problem.n}, {problem.d}) and ({problem.dt},)")
    res = problem.feasibility_residual()
    scale = max(
        1.0, float(torch.cat([problem.b.flatten(), problem.c.flatten(), problem.ct.flatten()]).abs().max())
    )
    if res > 1e-8 * scale:
        raise InfeasibleProblemError(
            f"problem: the constraints are inconsistent (least-squares residual {res:.3g})"
        )
    lam_max = float(torch.linalg.eigvalsh(W.detach().to("cpu", torch.float64)).max())
    if method == "dpmm":
        bound = 1.0 / (gamma * max(lam_max, 1e-300))
        beta = 0.5 * bound if beta is None else check_positive("beta", beta)
        if beta >= bound:
            raise ValueError(f"beta: must be below 1/(gamma lambda_max(W)) = {bound:.4g}, got {beta}")
    st = mixed_affine_setup(problem, W, "apapc").as_dict()
    st.update(c=c, theta=theta, alpha=alpha, gamma_dpmm=gamma, beta=float(beta or 0.0))

    like = problem.H
    dtype, device = like.dtype, like.device
    sl = slice(comm.local_clients.start, comm.local_clients.stop)
    d, dt = problem.d, problem.dt
    Ap_all, bp_all = coupled_form(problem, W)
    Ei_all, ei_all, zero_all = _local_constraints(problem)
    Ap, bp, Ei, ei, zero = Ap_all[sl], bp_all[sl], Ei_all[sl], ei_all[sl], zero_all[sl]
    H, h = problem.H[sl], problem.h[sl]
    ApT_Ap = Ap.transpose(1, 2) @ Ap
    eye = torch.eye(d + dt, dtype=dtype, device=device)
    if method == "tracking-admm":
        Kinv = _kkt_inverse(H + c * ApT_Ap, Ei, zero)
    else:
        Kinv = _kkt_inverse(H + gamma * ApT_Ap + eye / alpha, Ei, zero)
    Wd = W.to(dtype=dtype, device=device)
    M = torch.eye(problem.n, dtype=dtype, device=device) - Wd
    nl = comm.n_local
    mp = Ap.shape[1]
    stats = comm.stats
    r0 = stats.uplink_rounds
    b0 = stats.uplink_bits.clone()
    solves = [0]
    Z = like.new_zeros((nl, d + dt))
    state: dict[str, Any] = {"z": Z}
    if x_star is not None:
        Xs = x_star[0][sl].to(dtype=dtype, device=device)
        xts = x_star[1].to(dtype=dtype, device=device)
        den = None

    def evaluate(k: int) -> dict[str, float]:
        nonlocal den
        z = state["z"]
        X, Xt = z[:, :d], z[:, d:]
        with stats.paused():
            f = float(comm.client_sum(problem.loss(z, comm.local_clients).unsqueeze(1))[0])
            coupled = comm.client_sum(_bmv(problem.A[sl], X) - problem.b[sl]) if problem.m else z.new_zeros(0)
            xbar = comm.client_mean(Xt)
            loc = (_bmv(Ei, z) - ei).pow(2).sum(1) + (Xt - xbar).pow(2).sum(1)
            res2 = float(coupled.pow(2).sum()) + float(comm.client_sum(loc.unsqueeze(1))[0])
            row = {"objective": f, "residual": math.sqrt(max(res2, 0.0))}
            if x_star is not None:
                err = (X - Xs).pow(2).sum(1) + (Xt - xts).pow(2).sum(1)
                if den is None:
                    ref = Xs.pow(2).sum(1) + xts.pow(2).sum().expand(X.shape[0])
                    den = float(comm.client_sum(ref.unsqueeze(1))[0])
                num = float(comm.client_sum(err.unsqueeze(1))[0])
                row["rel_err"] = math.sqrt(num / max(den, 1e-300))
            bits = comm.client_mean((stats.uplink_bits - b0).to(dtype).unsqueeze(1))
        row.update(
            gossip_rounds=float(stats.uplink_rounds - r0),
            uplink_bits=float(bits[0]),
            grad_calls=float(solves[0]),
            k_products=0.0,
        )
        return row

    loop = SolverLoop(
        max_iter,
        tol=tol,
        criterion="rel_err" if x_star is not None else "residual",
        record_every=record_every,
        time_limit_s=time_limit_s,
        objective="objective",
        blowup=1e12,
        blowup_floor=1.0,
        agree=rank_agreement(comm, like),
    )
    Kpp, Kpe = Kinv[:, : d + dt, : d + dt], Kinv[:, : d + dt, d + dt :]
    ApT = Ap.transpose(1, 2)
    Imp = torch.eye(mp, dtype=dtype, device=device).expand(nl, mp, mp)
    zmp = like.new_zeros((nl, mp, mp))
    if method == "tracking-admm":
        # the step is affine in v = (M lam, M d, z): one precomputed matrix per node (vectorised)
        Gl = -Kpp @ ApT
        Tz = torch.cat([Gl, c * Gl, c * Kpp @ ApT_Ap], 2)
        g0 = _bmv(Kpp, h) + _bmv(Kpe, ei)
        Td = torch.cat([zmp, Imp, -Ap], 2) + Ap @ Tz
        T = torch.cat([torch.cat([Imp, zmp, like.new_zeros((nl, mp, d + dt))], 2) + c * Td, Td, Tz], 1)
        t0 = torch.cat([c * _bmv(Ap, g0), _bmv(Ap, g0), g0], 1)
        S = torch.cat([like.new_zeros((nl, mp)), _bmv(Ap, Z) - bp, Z], 1)  # (lam, d, z)
        for _ in loop.iterate(evaluate):
            mixed = comm.gossip(S[:, : 2 * mp], M)  # one round, lam and d in one stacked payload
            S = _bmv(T, torch.cat([mixed, S[:, 2 * mp :]], 1)) + t0
            solves[0] += 1
            state["z"] = S[:, 2 * mp :]
            if max_rounds is not None and stats.uplink_rounds - r0 >= max_rounds:
                loop.stop("max_iter")
    else:
        # zh = argmin f + yt^T(A'z - b') + gamma/2 |A'z - b'|^2 + |z - z_k|^2 / (2 alpha) on X_i is affine in
        # (y, Lam, z), and so are yh and the relaxed z: one precomputed matrix per node
        Gy = -Kpp @ ApT
        Zh = torch.cat([Gy, -gamma * Gy, Kpp / alpha], 2)
        k0 = _bmv(Kpp, h + gamma * _bmv(ApT, bp)) + _bmv(Kpe, ei)
        Yh = torch.cat([Imp, -gamma * Imp, like.new_zeros((nl, mp, d + dt))], 2) + gamma * Ap @ Zh
        eye_p = torch.eye(d + dt, dtype=dtype, device=device).expand(nl, d + dt, d + dt)
        Zn = torch.cat([like.new_zeros((nl, d + dt, 2 * mp)), (1 - theta) * eye_p], 2) + theta * Zh
        T = torch.cat([Yh, Zn], 1)
        t0 = torch.cat([gamma * (_bmv(Ap, k0) - bp), theta * k0], 1)
        y = like.new_zeros((nl, mp))
        Lam = like.new_zeros((nl, mp))
        z = Z
        for _ in loop.iterate(evaluate):
            out = _bmv(T, torch.cat([y, Lam, z], 1)) + t0
            solves[0] += 1
            yh, z = out[:, :mp], out[:, mp:]
            step = beta * comm.gossip(yh, Wd)
            Lam = Lam + step
            y = yh - gamma * step
            state["z"] = z
            if max_rounds is not None and stats.uplink_rounds - r0 >= max_rounds:
                loop.stop("max_iter")
    z = state["z"]
    X, Xt = z[:, :d], z[:, d:]
    with stats.paused():
        value = float(comm.client_sum(problem.loss(z, comm.local_clients).unsqueeze(1))[0])
    U = torch.cat([X, like.new_zeros(nl, problem.m), Xt], 1)
    extras = {"U": U, "setup": st, "comm": stats.as_dict()}
    return loop.result({"x": X, "xt": Xt}, value=value, extras=extras)


def solver_cases() -> list[SolverCase]:
    """Conformance cases: Tracking-ADMM and DPMM on the 4-node ring instance of the APAPC case."""
    from optarium.distributed.comm import Communicator
    from optarium.distributed.decentralized_affine import make_mixed_affine
    from optarium.distributed.topology import mixing_matrix

    ref = make_mixed_affine(4, d=3, dt=2, m=2, r=1, rt_nodes=(0,), kappa_f=5.0, seed=0)
    Xs, xts, _ = ref.solution()
    Wg = torch.eye(4, dtype=torch.float64) - mixing_matrix("ring", 4)
    scale = math.sqrt(float(Xs.pow(2).sum() + 4 * xts.pow(2).sum()))
    cases = []
    for method, kw0, conv_iter in (("tracking-admm", {"c": 1.0}, 3000), ("dpmm", {}, 3000)):

        def solve(
            *, dtype: torch.dtype, device: Any, seed: int, _m: str = method, _k: dict = kw0, **overrides: Any
        ) -> Result:
            p = ref.to(dtype=dtype, device=device)
            kw: dict[str, Any] = {"method": _m, "max_iter": 30, "x_star": (Xs, xts), **_k, **overrides}
            W = kw.pop("W", Wg).to(dtype=dtype, device=device)
            return solve_coupled_baseline(p, Communicator.local(4), W, **kw)

        def dist(res: Result) -> float:
            X = torch.as_tensor(res.x["x"]).detach().to("cpu", torch.float64)
            Xt = torch.as_tensor(res.x["xt"]).detach().to("cpu", torch.float64)
            return math.sqrt(float((X - Xs).pow(2).sum() + (Xt - xts).pow(2).sum())) / scale

        tol = 1e-9
        cases.append(
            SolverCase(
                name=f"decentralized-affine-{method}",
                solve=solve,
                statuses={
                    "converged": {"tol": tol, "max_iter": conv_iter},
                    "max_iter": {"max_iter": 7},
                    "timeout": {"time_limit_s": 0.0},
                },
                max_iter=7,
                tolerance_holds=lambda res, dist=dist, tol=tol: dist(res) <= tol * (1 + 1e-6),
                optimality=dist,
                optimality_tol=1e-8,
                invalid=[
                    ({"method": "newton"}, "method"),
                    ({"max_iter": -1}, "max_iter"),
                    ({"tol": -1.0}, "tol"),
                    ({"record_every": 0}, "record_every"),
                    ({"max_rounds": 0}, "max_rounds"),
                    ({"c": 0.0}, "c"),
                    ({"theta": 2.5}, "theta"),
                    ({"W": torch.eye(4, dtype=torch.float64)}, "W"),
                    ({"x_star": (Xs[:2], xts)}, "x_star"),
                    ({"time_limit_s": -1.0}, "time_limit_s"),
                ],
                exempt={
                    "diverged": "no admissible parameter diverges on these strongly convex problems "
                    "(Tracking-ADMM converges for every c > 0, DPMM within the bounds it enforces; "
                    "out-of-range theta/beta are rejected, see the bad-input tests); the blow-up guard is "
                    "the shared SolverLoop's, exercised by the APAPC case"
                },
            )
        )
    return cases
