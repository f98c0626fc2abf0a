r"""LS²MC-GDA: local smoothed, variance-reduced multi-level compositional GDA (federated minimax).

Paper: "LS²MC-GDA" (ICML 2026, federated stochastic multi-level compositional minimax; exact title, text and
code were not found). Its centralized predecessor, read in full, is Zhang & Gao, "On the Convergence of
Stochastic Smoothed Multi-Level Compositional Gradient Descent Ascent", NeurIPS 2025 (OpenReview
``Ceb788Uigr``, Algorithm 1 "Smoothed-SMCGDA-VR"); the federated setting follows Zhang, Payani, Lee,
Souvenir & Gao, "A Federated Stochastic Multi-Level Compositional Minimax Algorithm for Deep AUC
Maximization", ICML 2024 (PMLR v235 ``zhang24aw``).

Problem (:mod:`~optarium.distributed.compositional`): :math:`\min_x\max_y \frac1N\sum_n f_n(G_n(x), y)`,
:math:`G_n = g_n^{(K)}\circ\dots\circ g_n^{(1)}`, noisy values and VJPs only. One iteration of every client
(Algorithm 1 of the NeurIPS 2025 paper, run locally), with base step :math:`\eta`:

.. math::

    x^+ &= x - \gamma_x\eta\, p,\qquad y^+ = \Pi_Y(y + \gamma_y\eta\, q),\qquad
        z^+ = z + \gamma_z\eta\,(x^+ - z)\\
    h^{(k)+} &= g^{(k)}(h^{(k-1)+};\xi^{(k)})
        + (1-\alpha\eta^2)\big(h^{(k)} - g^{(k)}(h^{(k-1)};\xi^{(k)})\big),
        \quad h^{(0)} = x\\
    u(x, h, y) &= \partial g^{(1)}(h^{(0)})^\top\cdots\partial g^{(K)}(h^{(K-1)})^\top
        \nabla_u f(h^{(K)}, y;\zeta) + \omega (x - z),\qquad v = \nabla_y f(h^{(K)}, y;\zeta)\\
    p^+ &= u(x^+, h^+, y^+) + (1-\rho_x\eta^2)\big(p - u(x, h, y)\big),\qquad
    q^+ = v(h^+, y^+) + (1-\rho_y\eta^2)\big(q - v(h, y)\big)

(the same fresh sample :math:`\xi, \zeta` at the new and the old point; the Jacobian chain is a sequence of
VJPs, never a Jacobian). Every ``local_steps`` = I iterations the clients average :math:`(x, y, z, p, q)`
with one :meth:`~optarium.distributed.comm.Communicator.client_mean` of a single concatenated buffer; the
level estimators :math:`h^{(k)}` stay local (client-specific inner functions) unless ``average_levels``.
:math:`h_0, p_0, q_0` come from an initial mini-batch of size :math:`S` (``init_batch``).
``smoothing=False`` drops :math:`z` and the :math:`\omega` term;
:math:`\alpha\eta^2 = \rho\eta^2 = 1` switches variance reduction off (plug-in inner values).
Stage-wise extension (``stagewise_stages`` = R > 0): after
``steps`` smoothed iterations :math:`z` is frozen at the clients' mean :math:`x` (:math:`\gamma_z = 0`) and R
stages follow, stage r of :math:`T_r = T_0 2^r` iterations with steps :math:`\eta_r = \eta 2^{-r/2}`, each
started from a uniformly random stored iterate (all of :math:`x, y, z, h, p, q`) of the previous one; the
output is the random iterate of the last stage.

What is found and what is ours. **Found** (NeurIPS 2025 text): the smoothed objective
:math:`F + \frac\omega2\|x - z\|^2`, the per-level STORM recursion, the Jacobians at the estimated inner
values,
the large initial batch, the stage-wise extension with step sizes shrinking by :math:`\sqrt2` and random
restarts, and the defaults (learning rate and VR coefficient 0.1, :math:`\gamma` multipliers O(1),
:math:`\gamma_z = O(1/\kappa)`). **Reconstructed**: the printed direction-estimator formula was not decoded
(the form above is the evident one from the :math:`u_{a;b}` notation); the federated layer (local copies of
all state, averaging :math:`(x, y, z, p, q)` every I steps, local :math:`h`) is our design of the shape of
FESS-GDA (Shen et al., AISTATS 2024), since the ICML 2026 text was not found; the stage lengths
:math:`T_r = T_0 2^r` are ours (the theorem's constants were garbled in the text we read).

Baselines on the same round loop (same sampling, same communicator), as thin wrappers:

- :func:`local_sgda` (Deng & Mahdavi 2021): plug-in inner values and gradients
  (:math:`\alpha\eta^2 = \rho\eta^2 = 1`), no smoothing; averages :math:`(x, y)`.
- :func:`local_scgdam` (Zhang et al., NeurIPS 2023, Local-SCGDAM): moving-average (momentum) level
  estimators :math:`h^+ = (1-\beta) h + \beta g(h^{(k-1)+};\xi)` and momentum directions
  :math:`p^+ = (1-\beta)p + \beta u` (``estimator="momentum"``), no smoothing; averages :math:`(x, y, p, q)`.
- :func:`codasca` (Yuan et al., ICML 2021, CODASCA): plug-in compositional gradients with SCAFFOLD-type
  primal and dual control variates (``control_variates=True``; option-II controls from the round's
  displacement), no smoothing; averages :math:`(x, y)` and the controls. Reconstructed: CODASCA's
  stage-wise proximal restarts are not included (its control-variate core is).

SPMD: every state tensor is stacked over ``comm.local_clients``; all samples are drawn for all N clients
from one generator seeded with ``seed`` and each process keeps its rows, so world size 1, 2 or 3 give the
same iterates and the same communication counts. Monitoring (``problem.evaluate`` at the clients' mean,
consensus) runs with the statistics paused. A problem that returns non-finite values at the initial point
raises ``FloatingPointError``; non-finite iterates later end the run with status ``diverged`` (reported,
not raised, as the solver conformance suite requires).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_map

from optarium._core.result import Result
from optarium._core.seeding import derive_seed
from optarium._core.solver import SolverLoop
from optarium._core.validation import (
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
)
from optarium.distributed.compositional import CompositionalMinimaxProblem
from optarium.distributed.federated import client_index
from optarium.distributed.rounds import rank_agreement

__all__ = [
    "LS2MCGDA",
    "LS2MC_METHODS",
    "codasca",
    "local_scgdam",
    "local_sgda",
    "ls2mc_batch",
    "ls2mc_gda",
    "solver_cases",
]

_ESTIMATORS = ("storm", "momentum")


def _rows(batch: Any, idx: torch.Tensor) -> Any:
    return tree_map(lambda t: t[idx] if isinstance(t, torch.Tensor) else t, batch)


def _tile(batch: Any) -> Any:
    return tree_map(lambda t: torch.cat([t, t]) if isinstance(t, torch.Tensor) else t, batch)


def _level_value(g: Any, h: torch.Tensor, batch: Any, clients: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """The level's value and a VJP closure (the level's own ``vjp`` or ``torch.func.vjp``)."""
    vjp = getattr(g, "vjp", None)
    if vjp is not None:
        return g(h, batch, clients), lambda v: vjp(h, batch, clients, v)
    val, fn = torch.func.vjp(lambda a: g(a, batch, clients), h)
    return val, lambda v: fn(v)[0]


def _outer_grads(
    f: Any, u: torch.Tensor, y: torch.Tensor, batch: Any, clients: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    grads = getattr(f, "grads", None)
    if grads is not None:
        return grads(u, y, batch, clients)
    val, fn = torch.func.vjp(lambda a, b: f(a, b, batch, clients), u, y)
    return fn(torch.ones_like(val))


def _product(name: str, coef: float, eta2: float) -> float:
    """``coef * lr**2``, which must lie in (0, 1] (1 switches variance reduction off)."""
    coef = check_positive(name, coef)
    prod = coef * eta2
    if prod > 1.0 + 1e-12:
        raise ValueError(f"{name}: {name} * lr**2 must lie in (0, 1], got {coef!r} * {eta2!r} = {prod!r}")
    return min(prod, 1.0)


@dataclasses.dataclass
class _State:
    x: torch.Tensor
    y: torch.Tensor
    z: torch.Tensor
    h: list[torch.Tensor]
    p: torch.Tensor
    q: torch.Tensor
    cx: torch.Tensor | None = None  # control variates (CODASCA): client and global
    cy: torch.Tensor | None = None
    gx: torch.Tensor | None = None
    gy: torch.Tensor | None = None

    def clone(self) -> _State:
        return _State(
            *(
                None if v is None else ([t.clone() for t in v] if isinstance(v, list) else v.clone())
                for v in (
                    self.x,
                    self.y,
                    self.z,
                    self.h,
                    self.p,
                    self.q,
                    self.cx,
                    self.cy,
                    self.gx,
                    self.gy,
                )
            )
        )


class LS2MCGDA:
    r"""The stateful SPMD iteration of LS²MC-GDA (and its baselines' variants); see the module docstring.

    Args:
        problem: a :class:`~optarium.distributed.compositional.CompositionalMinimaxProblem`.
        comm: this process's :class:`~optarium.distributed.comm.Communicator`.
        x0, y0: the common starting point (default 0).
        lr: the base step :math:`\eta`.
        gamma_x, gamma_y, gamma_z: step multipliers (:math:`\gamma_z` only with smoothing).
        omega: smoothing weight :math:`\omega > 0` (with smoothing).
        smoothing: use the anchor :math:`z` and the term :math:`\omega(x - z)`.
        alpha, rho_x, rho_y: STORM (or momentum) coefficients; the products :math:`\alpha\eta^2`,
            :math:`\rho\eta^2` must lie in (0, 1] (1: no variance reduction).
        estimator: ``"storm"`` (the method) or ``"momentum"`` (moving averages, Local-SCGDAM).
        control_variates: SCAFFOLD-type control variates (CODASCA).
        local_steps: I, iterations between two averagings.
        average_levels: also average the level estimators (the level-averaged federated form).
        init_batch: the initial mini-batch size S; ``batch_size``: the per-iteration mini-batch size.
        y_projection: projection of y after each ascent step (e.g.
            :func:`~optarium.distributed.compositional.nonnegative`), or ``None``.
        seed: seeds the sample stream (the same on every rank).
    """

    def __init__(
        self,
        problem: CompositionalMinimaxProblem,
        comm: Any,
        *,
        x0: torch.Tensor | None = None,
        y0: torch.Tensor | None = None,
        lr: float = 0.1,
        gamma_x: float = 1.0,
        gamma_y: float = 1.0,
        gamma_z: float = 0.1,
        omega: float = 1.0,
        smoothing: bool = True,
        alpha: float = 10.0,
        rho_x: float = 10.0,
        rho_y: float = 10.0,
        estimator: str = "storm",
        control_variates: bool = False,
        local_steps: int = 8,
        average_levels: bool = False,
        init_batch: int = 32,
        batch_size: int = 1,
        y_projection: Callable[[torch.Tensor], torch.Tensor] | None = None,
        seed: int = 0,
    ) -> None:
        if not isinstance(problem, CompositionalMinimaxProblem):
            raise TypeError(f"problem: must be a CompositionalMinimaxProblem, got {type(problem).__name__}")
        if int(comm.n_clients) != problem.n_clients:
            raise ValueError(f"comm: has {comm.n_clients} clients, the problem {problem.n_clients}")
        self.problem, self.comm = problem, comm
        self.lr = check_positive("lr", lr)
        self.gamma_x = check_positive("gamma_x", gamma_x)
        self.gamma_y = check_positive("gamma_y", gamma_y)
        self.smoothing = bool(smoothing)
        if self.smoothing:
            self.omega = check_positive("omega", omega)
            self.gamma_z = check_nonnegative("gamma_z", gamma_z)
        else:
            self.omega, self.gamma_z = 0.0, 0.0
        eta2 = self.lr**2
        self.a = _product("alpha", alpha, eta2)
        self.bx = _product("rho_x", rho_x, eta2)
        self.by = _product("rho_y", rho_y, eta2)
        self.estimator = check_choice("estimator", estimator, _ESTIMATORS)
        self.control_variates = bool(control_variates)
        self.local_steps = check_int("local_steps", local_steps, minimum=1)
        self.average_levels = bool(average_levels)
        self.init_batch = check_int("init_batch", init_batch, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        if y_projection is not None and not callable(y_projection):
            raise TypeError(f"y_projection: must be callable or None, got {type(y_projection).__name__}")
        self.y_projection = y_projection
        self.seed = check_int("seed", seed, minimum=0)
        like = problem.like
        self.clients = client_index(comm.local_clients, device=like.device)
        self.clients2 = torch.cat([self.clients, self.clients])
        self.gen = torch.Generator(device=like.device).manual_seed(self.seed)
        x = self._point("x0", x0, problem.dim_x, like)
        y = self._point("y0", y0, problem.dim_y, like)
        n = comm.n_local
        X = x.expand(n, -1).clone()
        Y = y.expand(n, -1).clone()
        if self.y_projection is not None:
            Y = self.y_projection(Y)
        self.iteration = 0
        self.samples = 0
        self.stage_gamma_z: float | None = None  # gamma_z override (0 in the stage-wise phase)
        self.lr_scale = 1.0
        # initialisation from a large first batch: plug-in inner values and directions
        batches = self._draw(self.init_batch)
        h, vals = [X], []
        for k, g in enumerate(problem.inner):
            v, fn = _level_value(g, h[-1], batches[k], self.clients)
            h.append(v)
            vals.append(fn)
        gu, gy = _outer_grads(problem.outer, h[-1], Y, batches[-1], self.clients)
        for fn in reversed(vals):
            gu = fn(gu)
        self.state = _State(x=X, y=Y, z=X.clone(), h=h[1:], p=gu, q=gy)
        if self.control_variates:
            zx, zy = torch.zeros_like(X), torch.zeros_like(Y)
            self.state.cx, self.state.cy, self.state.gx, self.state.gy = zx, zy, zx.clone(), zy.clone()
        for name, t in (("p", gu), ("q", gy), *((f"h{k + 1}", t) for k, t in enumerate(h[1:]))):
            if not bool(torch.isfinite(t).all()):
                raise FloatingPointError(f"problem: non-finite {name} at the initial point")
        self._round_start = (X.clone(), Y.clone())

    @staticmethod
    def _point(name: str, v: torch.Tensor | None, d: int, like: torch.Tensor) -> torch.Tensor:
        if v is None:
            return torch.zeros(d, dtype=like.dtype, device=like.device)
        if not isinstance(v, torch.Tensor) or v.shape != (d,):
            raise ValueError(f"{name}: must be a tensor of shape ({d},)")
        return v.detach().to(dtype=like.dtype, device=like.device)

    def _draw(self, size: int) -> list[Any]:
        batches = self.problem.sample(self.gen, size)
        if len(batches) != self.problem.K + 1:
            raise ValueError(
                f"problem: sample() returned {len(batches)} batches, expected K + 1 = {self.problem.K + 1}"
            )
        self.samples += size
        return [_rows(b, self.clients) for b in batches]

    # ----------------------------------------------------------------------------------------- one step
    def _directions(
        self,
        X: torch.Tensor,
        Z: torch.Tensor,
        h_old: list[torch.Tensor],
        Y: torch.Tensor,
        batches: list[Any],
        clients: torch.Tensor,
        a: float,
        storm_old: bool,
    ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
        """New level estimators and (stacked new/old when ``storm_old``) compositional gradients."""
        n = self.comm.n_local
        inp = X
        h_new: list[torch.Tensor] = []
        fns = []
        for k, g in enumerate(self.problem.inner):
            val, fn = _level_value(g, inp, batches[k], clients)
            fns.append(fn)
            if storm_old:
                hk = val[:n] + (1.0 - a) * (h_old[k] - val[n:]) if a < 1.0 else val[:n]
                inp = torch.cat([hk, h_old[k]])
            elif self.estimator == "momentum" and a < 1.0:
                hk = (1.0 - a) * h_old[k] + a * val
                inp = hk
            else:
                hk = val
                inp = hk
            h_new.append(hk)
        gu, gy = _outer_grads(self.problem.outer, inp, Y, batches[-1], clients)
        for fn in reversed(fns):
            gu = fn(gu)
        if self.smoothing:
            gu = gu + self.omega * (X - Z)
        return h_new, gu, gy

    def step(self, batches: list[Any] | None = None) -> None:
        """One local iteration of every local client (and the averaging when it completes a round).

        ``batches``: the K + 1 batches of this process's clients (default: drawn from ``problem.sample``).
        """
        s = self.state
        eta = self.lr * self.lr_scale
        gz = self.gamma_z if self.stage_gamma_z is None else self.stage_gamma_z
        dx, dy = s.p, s.q
        if self.control_variates:
            dx, dy = dx - s.cx + s.gx, dy - s.cy + s.gy
        x_new = s.x - self.gamma_x * eta * dx
        y_new = s.y + self.gamma_y * eta * dy
        if self.y_projection is not None:
            y_new = self.y_projection(y_new)
        z_new = s.z + gz * eta * (x_new - s.z) if self.smoothing and gz > 0 else s.z
        if batches is None:
            batches = self._draw(self.batch_size)
        else:
            self.samples += self.batch_size
        a, bx, by = self.a, self.bx, self.by
        storm_old = self.estimator == "storm" and min(a, bx, by) < 1.0
        if storm_old:
            B = [_tile(b) for b in batches]
            h, gu, gy = self._directions(
                torch.cat([x_new, s.x]),
                torch.cat([z_new, s.z]),
                s.h,
                torch.cat([y_new, s.y]),
                B,
                self.clients2,
                a,
                True,
            )
            n = self.comm.n_local
            u_new, u_old, v_new, v_old = gu[:n], gu[n:], gy[:n], gy[n:]
            p = u_new + (1.0 - bx) * (s.p - u_old) if bx < 1.0 else u_new
            q = v_new + (1.0 - by) * (s.q - v_old) if by < 1.0 else v_new
        else:
            h, u_new, v_new = self._directions(x_new, z_new, s.h, y_new, batches, self.clients, a, False)
            if self.estimator == "momentum":
                p = (1.0 - bx) * s.p + bx * u_new if bx < 1.0 else u_new
                q = (1.0 - by) * s.q + by * v_new if by < 1.0 else v_new
            else:
                p, q = u_new, v_new
        s.x, s.y, s.z, s.h, s.p, s.q = x_new, y_new, z_new, h, p, q
        self.iteration += 1
        if self.iteration % self.local_steps == 0:
            self._average(eta)

    def _average(self, eta: float) -> None:
        """One client_mean of the concatenated state that the method shares."""
        s = self.state
        parts: list[tuple[str, torch.Tensor]] = [("x", s.x), ("y", s.y)]
        if self.smoothing:
            parts.append(("z", s.z))
        if min(self.bx, self.by) < 1.0:  # p, q carry information only when they are averages
            parts += [("p", s.p), ("q", s.q)]
        if self.average_levels:
            parts += [(f"h{k}", t) for k, t in enumerate(s.h)]
        if self.control_variates:
            x0, y0 = self._round_start
            steps = self.local_steps
            s.cx = s.cx - s.gx + (x0 - s.x) / (steps * self.gamma_x * eta)
            s.cy = s.cy - s.gy + (s.y - y0) / (steps * self.gamma_y * eta)
            parts += [("cx", s.cx), ("cy", s.cy)]
        sizes = [t.shape[1] for _, t in parts]
        mean = self.comm.client_mean(torch.cat([t for _, t in parts], 1))
        chunks = mean.split(sizes)
        n = self.comm.n_local
        for (name, _), m in zip(parts, chunks, strict=True):
            m = m.expand(n, -1).clone()
            if name in ("x", "y", "z", "p", "q"):
                setattr(s, name, m)
            elif name == "cx":
                s.gx = m
            elif name == "cy":
                s.gy = m
            else:
                s.h[int(name[1:])] = m
        self._round_start = (s.x.clone(), s.y.clone())

    # ----------------------------------------------------------------------------------------- views
    def means(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The clients' mean ``(x, y)`` (uncharged collectives)."""
        with self.comm.stats.paused():
            return self.comm.client_mean(self.state.x), self.comm.client_mean(self.state.y)

    def metrics(self) -> dict[str, float]:
        """The recorded row: the problem's metrics at the means, consensus, communication, samples."""
        st = self.comm.stats
        xbar, ybar = self.means()
        row = self.problem.evaluate(xbar, ybar)
        with st.paused():
            spread = ((self.state.x - xbar) ** 2).sum(-1, keepdim=True)
            bits = torch.stack([st.uplink_bits, st.downlink_bits], -1).to(spread)
            tot = self.comm.client_sum(torch.cat([spread, bits], -1))
        row.update(
            consensus=float(tot[0]),
            uplink_bits=float(tot[1]) / self.comm.n_clients,
            downlink_bits=float(tot[2]) / self.comm.n_clients,
            comm_rounds=float(max(st.uplink_rounds, st.downlink_rounds)),
            samples=float(self.samples),
        )
        row["bytes"] = (row["uplink_bits"] + row["downlink_bits"]) / 8.0
        return row

    def result(self, loop: SolverLoop, extras: dict[str, Any] | None = None) -> Result:
        """The run's :class:`Result`: ``x`` the clients' mean; ``value`` :math:`\\Phi` (or the objective)."""
        with loop.evaluating():
            xbar, ybar = self.means()
            ev = self.problem.evaluate(xbar, ybar)
        value = ev.get("phi", ev.get("objective", float(self.state.x.norm())))
        out = {
            "y": ybar,
            "X": self.state.x,
            "Y": self.state.y,
            "comm": self.comm.stats.as_dict(),
            "samples": float(self.samples),
            **(extras or {}),
        }
        return loop.result(xbar, value=value, extras=out)


def ls2mc_gda(
    problem: CompositionalMinimaxProblem,
    comm: Any,
    steps: int,
    *,
    lr: float = 0.1,
    gamma_x: float = 1.0,
    gamma_y: float = 1.0,
    gamma_z: float = 0.1,
    omega: float = 1.0,
    smoothing: bool = True,
    alpha: float = 10.0,
    rho_x: float = 10.0,
    rho_y: float = 10.0,
    estimator: str = "storm",
    control_variates: bool = False,
    local_steps: int = 8,
    average_levels: bool = False,
    init_batch: int = 32,
    batch_size: int = 1,
    y_projection: Callable[[torch.Tensor], torch.Tensor] | None = None,
    stagewise_stages: int = 0,
    stage_steps: int | None = None,
    seed: int = 0,
    x0: torch.Tensor | None = None,
    y0: torch.Tensor | None = None,
    tol: float | None = None,
    criterion: str = "grad_phi_norm",
    record_every: int | None = None,
    time_limit_s: float | None = None,
) -> Result:
    r"""Run LS²MC-GDA for ``steps`` local iterations (then ``stagewise_stages`` stages; module docstring).

    The arguments are those of :class:`LS2MCGDA`, plus: ``stagewise_stages`` R and ``stage_steps`` T_0
    (default ``steps // 10``, at least ``local_steps``) of the stage-wise extension; ``tol``: stop
    (``converged``) once the recorded ``criterion`` metric (default the exact
    :math:`\|\nabla\Phi(\bar x)\|` of problems that report it) is at most ``tol``;
    ``record_every`` (default ``local_steps``: once per round);
    ``time_limit_s`` (solver seconds, evaluation excluded, agreed by all ranks).

    Returns:
        :class:`~optarium._core.result.Result`: ``x`` the clients' mean, ``value`` :math:`\Phi(\bar x)` where
        the problem reports it, history (the problem's metrics, consensus, bits per client, communication
        rounds, samples per client), extras (``y``, the local ``X``/``Y`` blocks, ``comm`` statistics,
        ``samples``, ``stage_picks``).
    """
    steps = check_int("steps", steps, minimum=0)
    stages = check_int("stagewise_stages", stagewise_stages, minimum=0)
    opt = LS2MCGDA(
        problem,
        comm,
        x0=x0,
        y0=y0,
        lr=lr,
        gamma_x=gamma_x,
        gamma_y=gamma_y,
        gamma_z=gamma_z,
        omega=omega,
        smoothing=smoothing,
        alpha=alpha,
        rho_x=rho_x,
        rho_y=rho_y,
        estimator=estimator,
        control_variates=control_variates,
        local_steps=local_steps,
        average_levels=average_levels,
        init_batch=init_batch,
        batch_size=batch_size,
        y_projection=y_projection,
        seed=seed,
    )
    if stages and not opt.smoothing:
        raise ValueError("stagewise_stages: the stage-wise extension needs smoothing=True")
    t0 = (
        max(opt.local_steps, steps // 10)
        if stage_steps is None
        else check_int("stage_steps", stage_steps, minimum=1)
    )
    record_every = (
        opt.local_steps if record_every is None else check_int("record_every", record_every, minimum=1)
    )
    if tol is not None:
        tol = check_nonnegative("tol", tol)
    lengths = [t0 * 2**r for r in range(stages)]
    total = steps + sum(lengths)
    # stage r starts at starts[r]; its random pick is drawn up front from a generator of its own
    starts = [steps + sum(lengths[:r]) for r in range(stages)]
    pick_gen = torch.Generator().manual_seed(derive_seed(opt.seed, "ls2mc-stage"))
    picks = [int(torch.randint(1, T + 1, (1,), generator=pick_gen)) for T in lengths]
    snapshot: _State | None = None
    loop = SolverLoop(
        total,
        tol=tol,
        criterion=criterion,
        record_every=record_every,
        time_limit_s=time_limit_s,
        objective="objective",
        blowup=1e12,
        blowup_floor=1.0,
        agree=rank_agreement(comm, problem.like),
    )
    stage = -1
    for k in loop.iterate(lambda _k: opt.metrics()):
        if stage + 1 < stages and k - 1 == starts[stage + 1]:
            if stage >= 0 and snapshot is not None:
                opt.state = snapshot.clone()
            else:  # end of the smoothed phase: freeze z at the clients' mean x
                with comm.stats.paused():
                    xbar = comm.client_mean(opt.state.x)
                opt.state.z = xbar.expand(comm.n_local, -1).clone()
            stage += 1
            opt.stage_gamma_z = 0.0
            opt.lr_scale = 2.0 ** (-stage / 2)
            snapshot = None
        opt.step()
        if stage >= 0 and k - starts[stage] == picks[stage]:
            snapshot = opt.state.clone()
        if k == total and stage >= 0 and snapshot is not None:
            opt.state = snapshot.clone()
    return opt.result(loop, extras={"stage_picks": picks, "stage_lengths": lengths})


def local_sgda(problem: CompositionalMinimaxProblem, comm: Any, steps: int, **kwargs: Any) -> Result:
    """Local SGDA with plug-in compositional gradients (no smoothing, no variance reduction)."""
    lr = kwargs.get("lr", 0.1)
    base = {"smoothing": False, "alpha": 1.0 / lr**2, "rho_x": 1.0 / lr**2, "rho_y": 1.0 / lr**2}
    return ls2mc_gda(problem, comm, steps, **{**base, **kwargs})


def local_scgdam(
    problem: CompositionalMinimaxProblem, comm: Any, steps: int, *, momentum: float = 0.1, **kwargs: Any
) -> Result:
    """Local-SCGDAM: moving-average level estimators and momentum directions with coefficient ``momentum``."""
    lr = kwargs.get("lr", 0.1)
    momentum = check_in_range("momentum", momentum, 0.0, 1.0, low_inclusive=False)
    c = momentum / lr**2
    base = {"smoothing": False, "estimator": "momentum", "alpha": c, "rho_x": c, "rho_y": c}
    return ls2mc_gda(problem, comm, steps, **{**base, **kwargs})


def codasca(problem: CompositionalMinimaxProblem, comm: Any, steps: int, **kwargs: Any) -> Result:
    """CODASCA's core: plug-in compositional local SGDA with primal/dual SCAFFOLD control variates."""
    lr = kwargs.get("lr", 0.1)
    base = {
        "smoothing": False,
        "control_variates": True,
        "alpha": 1.0 / lr**2,
        "rho_x": 1.0 / lr**2,
        "rho_y": 1.0 / lr**2,
    }
    return ls2mc_gda(problem, comm, steps, **{**base, **kwargs})


#: The solvers :func:`ls2mc_batch` runs, by name.
LS2MC_METHODS: dict[str, Callable[..., Result]] = {
    "ls2mc-gda": ls2mc_gda,
    "local-sgda": local_sgda,
    "local-scgdam": local_scgdam,
    "codasca": codasca,
}


def ls2mc_batch(comm: Any, jobs: Sequence[tuple[str, Any, int, dict[str, Any]]]) -> list[Result]:
    """SPMD entry point for :func:`~optarium.distributed.launch`: ``(method, problem, steps, kwargs)`` jobs.

    The statistics are reset before each job; each Result's ``X``/``Y`` blocks are replaced by every
    client's rows (gathered without charging the statistics).
    """
    out = []
    for method, problem, steps, kwargs in jobs:
        check_choice("method", method, tuple(LS2MC_METHODS))
        comm.stats.reset()
        res = LS2MC_METHODS[method](problem, comm, steps, **kwargs)
        with comm.stats.paused():
            gathered = {k: comm.all_gather_clients(res.extras[k]) for k in ("X", "Y")}
        out.append(dataclasses.replace(res, extras={**res.extras, **gathered}))
    return out


def solver_cases() -> list[Any]:
    """The conformance case: noise-free small tanh problem, I = 1, converged on the exact gradient norm."""
    from optarium._core.solver import SolverCase
    from optarium.distributed.comm import Communicator
    from optarium.distributed.compositional import TanhCompositional, make_tanh_compositional

    tol = 1e-4

    def build(dtype: torch.dtype, device: Any, sigma: float) -> Any:
        # c_n = G_n(x*): Phi(x*) = 0, so the minimum is attained (tanh saturation cannot hide it)
        base = make_tanh_compositional(2, 4, (3, 3), mu=1.0, sigma=sigma, seed=0)
        x_star = torch.linspace(-0.5, 0.5, 4, dtype=torch.float64)
        c = base.chain(x_star)[-1].clone()
        return TanhCompositional(
            [W.to(dtype=dtype, device=device) for W in base.Ws], c.to(dtype=dtype, device=device), 1.0, sigma
        )

    ref = build(torch.float64, "cpu", 0.0)

    def solve(*, dtype: torch.dtype, device: Any, seed: int, **over: Any) -> Result:
        sigma = over.pop("sigma", 0.0)
        p = build(dtype, device, sigma)
        kw: dict[str, Any] = {
            "steps": 200,
            "lr": 0.3,
            "local_steps": 1,
            "alpha": 1 / 0.09,
            "omega": 0.3,
            "gamma_z": 1.0,
            "record_every": 20,
            "seed": seed,
        }
        kw.update(over)
        steps = kw.pop("steps")
        return ls2mc_gda(p, Communicator.local(p.n_clients), steps, **kw)

    def gnorm(res: Result) -> float:
        return float(ref.phi(torch.as_tensor(res.x).detach().to("cpu", torch.float64))[1].norm())

    return [
        SolverCase(
            name="ls2mc-gda",
            solve=solve,
            statuses={
                "converged": {"tol": tol, "steps": 4000},
                "max_iter": {"steps": 7},
                "diverged": {"lr": 0.9, "gamma_y": 30.0, "alpha": 1.0, "rho_x": 1.0, "rho_y": 1.0},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=7,
            tolerance_holds=lambda res: gnorm(res) <= tol * (1 + 1e-6),
            optimality=gnorm,
            optimality_tol=1e-4,
            invalid=[
                ({"steps": -1}, "steps"),
                ({"lr": -1.0}, "lr"),
                ({"omega": 0.0}, "omega"),
                ({"alpha": 100.0}, "alpha"),
                ({"rho_x": 100.0}, "rho_x"),
                ({"local_steps": 0}, "local_steps"),
                ({"seed": -1}, "seed"),
                ({"record_every": 0}, "record_every"),
                ({"x0": torch.zeros(3)}, "x0"),
                ({"estimator": "adam"}, "estimator"),
            ],
            determinism={"sigma": 0.5, "steps": 20},
            stochastic=True,
        )
    ]
