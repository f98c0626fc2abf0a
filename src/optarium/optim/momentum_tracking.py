r"""SGD, heavy ball and Nesterov tracking a drifting optimum: a batched simulator and exact analytic values.

Reference: Sharan Sahu, Cameron J. Hogan, Martin T. Wells, "On the Provable Suboptimality of Momentum SGD in
Nonstationary Stochastic Optimization", arXiv:2601.12238 (ICML 2026). The paper proves that the tracking
error splits into a transient, a noise term and a drift term, and that momentum amplifies the drift term by a
factor that diverges as :math:`\beta \to 1` (of order :math:`(1-\beta)^{-2}` in the paper's notes); its
theorem constants were not reachable, so what is here is the standard form of the three methods and an exact
laboratory for the decomposition the paper proves (the spec's, /work/shared/papers/momentum-tracking.md).

**Updates** (gradient :math:`g_t = \nabla F(p_t, \xi_t) = A(p_t - \theta_t) + \sigma\xi_t` on the drifting
quadratic of :class:`optarium.problems.drifting.DriftingQuadratic`, taken against :math:`\theta_t`; then
:math:`\theta` moves to :math:`\theta_{t+1}`), written as ``torch.optim.SGD`` writes them (buffer
:math:`b_{-1} = 0`):

- SGD: :math:`p_{t+1} = p_t - \eta g_t`;
- heavy ball (``torch.optim.SGD(momentum=β)``): :math:`b_t = \beta b_{t-1} + g_t`,
  :math:`p_{t+1} = p_t - \eta b_t`, i.e. :math:`p_{t+1} = p_t - \eta g_t + \beta(p_t - p_{t-1})`;
- Nesterov (``torch.optim.SGD(momentum=β, nesterov=True)``): :math:`b_t = \beta b_{t-1} + g_t`,
  :math:`p_{t+1} = p_t - \eta(g_t + \beta b_t)`. Its iterates are the look-ahead sequence
  :math:`p_t = y_t = x_t + \beta(x_t - x_{t-1})` of the textbook form
  :math:`x_{t+1} = y_t - \eta\nabla F(y_t, \xi_t)`; :math:`x_t = p_t + \eta\beta b_{t-1}`.

The tracking error is measured on the sequence that receives the gradient (``sequence="gradient"``:
:math:`\lVert p_t - \theta_t\rVert^2`); ``sequence="x"`` measures Nesterov's :math:`x_t` instead.
**Parametrisations**: ``"raw"`` takes ``lr`` as η; ``"effective"`` takes the effective step
:math:`\eta_{\rm eff} = \eta/(1-\beta)` (so η = (1 − β) lr).

**Analytic values.** Per eigen-mode λ the error state :math:`s_t = (e_t, m_t)`, :math:`e_t = x_t - \theta_t`,
:math:`m_t = x_t - x_{t-1}` obeys :math:`s_{t+1} = M s_t - (w_t + \eta\sigma\xi_t,\ \eta\sigma\xi_t)` with
:math:`w_t = \theta_{t+1} - \theta_t` and the iteration matrix (a = ηλ)
:math:`M_{HB} = \begin{pmatrix}1-a & \beta\\ -a & \beta\end{pmatrix}`,
:math:`M_{NAG} = \begin{pmatrix}1-a & \beta(1-a)\\ -a & \beta(1-a)\end{pmatrix}`; the measured error is
:math:`c^\top s_t` with :math:`c = (1, 0)`, or :math:`(1, \beta)` for Nesterov's gradient sequence. The
covariance recursion :math:`P_{t+1} = M P_t M^\top + Q_t` (noise, random-walk steps and switch jumps) and
the mean responses to the deterministic drifts (linear, rotation; averaged exactly over the random
direction) give :math:`E\lVert e_t\rVert^2` exactly at every t (:func:`analytic_error_curve`); the
stationary value solves the discrete Lyapunov equation :math:`P = M P M^\top + Q`
(:func:`stationary_error`). Stability limits (largest eigenvalue L): η < 2/L (SGD), 2(1+β)/L (HB),
2(1+β)/((1+2β)L) (NAG) (:func:`stability_limit`).

:func:`batched_errors` runs settings × rows (seeds, cells) × d as one float64 program with common random
numbers; :func:`track` wraps it for one method and returns an :class:`optarium._core.Result`;
:func:`tracking_decomposition` runs noise only, drift only, initial error only and all together.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import torch

from optarium._core.result import Result, Trace
from optarium._core.solver import SolverCase
from optarium._core.validation import (
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
)
from optarium.problems.drifting import DriftingQuadratic, DriftRealisation, drift_statistics

__all__ = [
    "METHODS",
    "PARAMETRIZATIONS",
    "SEQUENCES",
    "analytic_error_curve",
    "analytic_tracking_error",
    "batched_errors",
    "default_window",
    "iteration_matrix",
    "raw_lr",
    "solver_cases",
    "stability_limit",
    "stationary_error",
    "track",
    "tracking_decomposition",
]

METHODS: tuple[str, ...] = ("sgd", "heavy_ball", "nesterov")
PARAMETRIZATIONS: tuple[str, ...] = ("raw", "effective")
SEQUENCES: tuple[str, ...] = ("gradient", "x")

_F64 = torch.float64


# ------------------------------------------------------------------------------------------------ arguments
def _check_method(method: str, beta: float) -> float:
    check_choice("method", method, METHODS)
    beta = check_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
    if method == "sgd" and beta != 0.0:
        raise ValueError(f"beta: must be 0 for sgd, got {beta}")
    return beta


def raw_lr(lr: float, beta: float, parametrization: str = "raw") -> float:
    """The raw step η of ``lr`` in ``parametrization``: ``lr`` (raw) or ``(1 - beta) * lr`` (effective)."""
    lr = check_positive("lr", lr)
    beta = check_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
    check_choice("parametrization", parametrization, PARAMETRIZATIONS)
    return lr if parametrization == "raw" else (1.0 - beta) * lr


def stability_limit(method: str, beta: float, lam: float) -> float:
    """The largest stable raw step η on curvature ``lam`` (from the 2x2 iteration matrix).

    SGD 2/λ; heavy ball 2(1+β)/λ; Nesterov 2(1+β)/((1+2β)λ).
    """
    beta = _check_method(method, beta)
    lam = check_positive("lam", lam)
    if method == "nesterov":
        return 2.0 * (1.0 + beta) / ((1.0 + 2.0 * beta) * lam)
    return 2.0 * (1.0 + beta) / lam


def iteration_matrix(method: str, lr: Any, beta: Any, lam: Any) -> torch.Tensor:
    """The error-state iteration matrix M ``[..., 2, 2]`` (state (e, m); see the module docstring).

    ``lr`` (raw), ``beta`` and ``lam`` broadcast against each other (numbers or tensors). ``method`` is
    ``"nesterov"`` for Nesterov, anything in :data:`METHODS` else (SGD is heavy ball with β = 0).
    """
    check_choice("method", method, METHODS)
    lr_t, beta_t, lam_t = (torch.as_tensor(v, dtype=_F64) for v in (lr, beta, lam))
    lr_t, beta_t, lam_t = torch.broadcast_tensors(lr_t, beta_t, lam_t)
    a = lr_t * lam_t
    damp = beta_t * (1.0 - a) if method == "nesterov" else beta_t
    row0 = torch.stack([1.0 - a, damp], -1)
    row1 = torch.stack([-a, damp], -1)
    return torch.stack([row0, row1], -2)


# -------------------------------------------------------------------------------------------------- windows
def default_window(problem: DriftingQuadratic, steps: int) -> tuple[int, int]:
    """The measurement window [start, stop): the second half, or for ``switch`` the segments after each jump
    (t in [K, K floor(T/K))) when there is at least one complete one."""
    steps = check_int("steps", steps, minimum=1)
    if problem.drift == "switch" and problem.delta > 0:
        k = problem.switch_every
        stop = k * (steps // k)
        if stop > k:
            return k, stop
    return steps // 2, steps


def _weights(windows: Sequence[tuple[int, int]], steps: int) -> torch.Tensor:
    w = torch.zeros(len(windows), steps, dtype=_F64)
    for i, (a, b) in enumerate(windows):
        if not 0 <= a < b <= steps:
            raise ValueError(f"window: must satisfy 0 <= start < stop <= {steps}, got {(a, b)}")
        w[i, a:b] = 1.0 / (b - a)
    return w


# ------------------------------------------------------------------------------------------------ simulator
@torch.no_grad()
def batched_errors(
    theta0: torch.Tensor,
    path: torch.Tensor,
    noise: torch.Tensor,
    x0: torch.Tensor,
    eigenvalues: torch.Tensor,
    lr: torch.Tensor,
    beta: torch.Tensor,
    nesterov: torch.Tensor,
    weights: torch.Tensor,
    *,
    delta: torch.Tensor | float = 1.0,
    noise_std: torch.Tensor | float = 1.0,
    path_index: torch.Tensor | None = None,
    noise_index: torch.Tensor | None = None,
    sequence: str = "gradient",
    record: bool = False,
    check: Any = None,
) -> dict[str, torch.Tensor]:
    r"""Run K settings x R rows of SGD / heavy ball / Nesterov (torch.optim.SGD's form) as one program.

    Row r has start ``theta0[r]``, optimum :math:`\theta_t = \theta_0 + \delta_r W_t` with the unit path
    ``W = path[path_index[r]]`` (``[U, T + 1, d]``), gradient noise :math:`\sigma_r\,\xi_t` with
    ``ξ = noise[noise_index[r]]`` (``[V, T, d]``) and first iterate ``x0[r]``. Setting k of row r uses raw
    step ``lr[k, r]``, momentum ``beta[k, r]`` and Nesterov where ``nesterov[k, r]`` (``[K, R]`` each,
    broadcastable). Every setting of a row sees the same draws (common random numbers).

    Returns ``errors`` ``[K, R]``: :math:`\sum_t w_{r,t} \lVert e_t\rVert^2` with ``weights`` ``[R, T]``
    (e.g. a window mean), +inf where a run became non-finite (with ``sequence="x"`` and a Nesterov setting
    also ``errors_gradient``: the same on the gradient sequence); ``final`` ``[K, R, d]``: the iterate
    :math:`p_T`; with ``record``: ``sq`` and ``regret`` ``[T + 1, K, R]``, the per-step
    :math:`\lVert e_t\rVert^2` and :math:`f_t(p_t) - f_t(\theta_t)`, t = 0..T. ``check`` is called every 500
    steps (a deadline check).
    """
    check_choice("sequence", sequence, SEQUENCES)
    n_rows, d = theta0.shape
    steps = int(noise.shape[1])
    if path.shape[1] != steps + 1 or path.shape[2] != d or noise.shape[2] != d:
        raise ValueError(f"path: must be [U, {steps + 1}, {d}] with noise [V, {steps}, {d}]")
    if weights.shape != (n_rows, steps):
        raise ValueError(f"weights: must be [{n_rows}, {steps}], got {tuple(weights.shape)}")
    pidx = torch.arange(n_rows) if path_index is None else path_index
    nidx = torch.arange(n_rows) if noise_index is None else noise_index
    lr, beta = torch.as_tensor(lr, dtype=_F64), torch.as_tensor(beta, dtype=_F64)
    nest = torch.as_tensor(nesterov, dtype=torch.bool)
    lr, beta, nest = torch.broadcast_tensors(lr, beta, nest)
    if lr.dim() != 2 or lr.shape[1] != n_rows:
        raise ValueError(f"lr: must broadcast to [K, {n_rows}], got {tuple(lr.shape)}")
    if not bool((torch.isfinite(lr) & (lr > 0)).all()):
        raise ValueError("lr: every step must be finite and > 0")
    if not bool(((beta >= 0) & (beta < 1)).all()):
        raise ValueError("beta: every momentum must lie in [0, 1)")
    k = lr.shape[0]
    lr3, beta3 = lr.unsqueeze(-1), beta.unsqueeze(-1)
    nest3 = nest.unsqueeze(-1).to(_F64)
    c_g = lr3 * nest3  # p -= lr * (nest * g + (nest ? beta : 1) * b)
    c_b = lr3 * (nest3 * beta3 + (1.0 - nest3))
    c_x = lr3 * beta3 * nest3  # x_t = p_t + lr * beta * b_{t-1} for Nesterov
    delta_r = torch.as_tensor(delta, dtype=_F64).expand(n_rows).reshape(n_rows, 1)
    sigma_r = torch.as_tensor(noise_std, dtype=_F64).expand(n_rows).reshape(n_rows, 1)
    path_tm = path.transpose(0, 1)  # [T + 1, U, d]: one contiguous slab per step
    noise_tm = noise.transpose(0, 1)
    lam = eigenvalues.to(_F64)
    w_tm = weights.T.contiguous()  # [T, R]
    p = x0.to(_F64).expand(k, n_rows, d).clone()
    b = torch.zeros_like(p)
    acc = torch.zeros(k, n_rows, dtype=_F64)
    acc_g = torch.zeros(k, n_rows, dtype=_F64)
    sq_rec = torch.empty(steps + 1, k, n_rows, dtype=_F64) if record else None
    reg_rec = torch.empty(steps + 1, k, n_rows, dtype=_F64) if record else None
    measure_x = sequence == "x" and bool(nest.any())
    e = torch.empty_like(p)
    g = torch.empty_like(p)
    for t in range(steps):
        theta_t = theta0 + delta_r * path_tm[t].index_select(0, pidx)
        xi_t = sigma_r * noise_tm[t].index_select(0, nidx)
        torch.sub(p, theta_t, out=e)
        em = e + c_x * b if measure_x else e
        sq = (em * em).sum(-1)
        if bool((w_tm[t] != 0).any()):
            acc.add_(sq * w_tm[t])
            if measure_x:
                acc_g.add_((e * e).sum(-1) * w_tm[t])
        if record:
            assert sq_rec is not None and reg_rec is not None
            sq_rec[t] = sq
            reg_rec[t] = 0.5 * (e * e * lam).sum(-1)
        torch.mul(e, lam, out=g)
        g.add_(xi_t)
        b.mul_(beta3).add_(g)
        p.addcmul_(c_g, g, value=-1.0).addcmul_(c_b, b, value=-1.0)
        if check is not None and t % 500 == 499:
            check()
    if record:  # the final iterate p_T against theta_T
        assert sq_rec is not None and reg_rec is not None
        torch.sub(p, theta0 + delta_r * path_tm[steps].index_select(0, pidx), out=e)
        em = e + c_x * b if measure_x else e
        sq_rec[steps] = (em * em).sum(-1)
        reg_rec[steps] = 0.5 * (e * e * lam).sum(-1)
    bad = ~torch.isfinite(acc) | ~torch.isfinite(p).all(-1)
    inf = torch.full_like(acc, math.inf)
    out = {"errors": torch.where(bad, inf, acc), "final": p}
    if measure_x:
        out["errors_gradient"] = torch.where(bad, inf, acc_g)
    if record:
        assert sq_rec is not None and reg_rec is not None
        out["sq"], out["regret"] = sq_rec, reg_rec
    return out


def _rows(real: DriftRealisation) -> dict[str, Any]:
    return {
        "theta0": real.theta0,
        "path": real.path,
        "noise": real.noise,
        "x0": real.x0(),
        "delta": real.delta,
        "noise_std": real.noise_std,
    }


def track(
    problem: DriftingQuadratic,
    method: str = "sgd",
    lr: float = 0.5,
    beta: float = 0.0,
    steps: int = 4000,
    n_seeds: int = 50,
    parametrization: str = "raw",
    *,
    seeds: Sequence[int] | None = None,
    window: tuple[int, int] | None = None,
    sequence: str = "gradient",
    record_every: int = 1,
) -> Result:
    """Run ``method`` on ``problem`` over ``n_seeds`` seeds (indices 0..n-1, or ``seeds``) for ``steps``.

    Returns a :class:`~optarium._core.Result`: ``x`` the final iterates ``[S, d]``; ``value`` the mean over
    seeds of the window mean of :math:`\\lVert e_t\\rVert^2` (window: :func:`default_window` unless given);
    ``history`` a :class:`~optarium._core.Trace` every ``record_every`` steps of the mean, 10/50/90 %
    quantiles over seeds of :math:`\\lVert e_t\\rVert^2` and the mean dynamic regret
    :math:`f_t(p_t) - f_t(\\theta_t)`; ``status`` ``"max_iter"`` (``"diverged"`` if non-finite); ``extras``:
    ``per_seed`` (window means), ``se``, ``delta_t`` ``[S, T]`` (realised drift), ``V_T`` ``[S]`` (gradient
    variation), ``regret`` ``[S]`` (cumulative dynamic regret), ``lr`` (raw), ``lr_effective``, ``beta``,
    ``method``, ``parametrization``, ``window``, ``analytic`` (the exact expectation of ``value``).
    """
    if not isinstance(problem, DriftingQuadratic):
        raise TypeError(f"problem: must be a DriftingQuadratic, got {type(problem).__name__}")
    beta = _check_method(method, beta)
    eta = raw_lr(lr, beta, parametrization)
    steps = check_int("steps", steps, minimum=1)
    record_every = check_int("record_every", record_every, minimum=1)
    if seeds is None:
        seeds = range(check_int("n_seeds", n_seeds, minimum=1))
    real = problem.realise(list(seeds), steps)
    win = default_window(problem, steps) if window is None else (int(window[0]), int(window[1]))
    n = len(real.seeds)
    start = time.perf_counter()
    out = batched_errors(
        **_rows(real),
        eigenvalues=problem.eigenvalues,
        lr=torch.full((1, n), eta, dtype=_F64),
        beta=torch.full((1, n), beta, dtype=_F64),
        nesterov=torch.full((1, n), method == "nesterov"),
        weights=_weights([win] * n, steps),
        sequence=sequence,
        record=True,
    )
    wall = time.perf_counter() - start
    per_seed = out["errors"][0]
    sq, regret = out["sq"][:, 0, :], out["regret"][:, 0, :]
    idx = sorted(set(range(0, steps, record_every)) | {steps})  # the history ends at n_iter = T
    qs = torch.quantile(sq[idx], torch.tensor([0.1, 0.5, 0.9], dtype=_F64), dim=1)
    history = Trace(
        steps=tuple(idx),
        metrics={
            "error_mean": tuple(sq[idx].mean(1).tolist()),
            "error_q10": tuple(qs[0].tolist()),
            "error_q50": tuple(qs[1].tolist()),
            "error_q90": tuple(qs[2].tolist()),
            "regret_mean": tuple(regret[idx].mean(1).tolist()),
        },
    )
    delta_t, v_t = drift_statistics(real.theta(), problem.eigenvalues)
    finite = bool(torch.isfinite(per_seed).all())
    value = float(per_seed.mean())
    se = float(per_seed.std() / math.sqrt(n)) if n > 1 else math.nan
    analytic = analytic_tracking_error(problem, method, eta, beta, steps, window=win, sequence=sequence)
    return Result(
        x=out["final"][0],
        value=value,
        status="max_iter" if finite else "diverged",
        n_iter=steps,
        history=history,
        wall_time_s=wall,
        extras={
            "per_seed": per_seed,
            "se": se,
            "delta_t": delta_t,
            "V_T": v_t,
            "regret": regret[:steps].sum(0),
            "lr": eta,
            "lr_effective": eta / (1.0 - beta),
            "beta": beta,
            "method": method,
            "parametrization": parametrization,
            "window": win,
            "analytic": analytic,
        },
    )


def tracking_decomposition(
    problem: DriftingQuadratic,
    method: str = "sgd",
    lr: float = 0.5,
    beta: float = 0.0,
    steps: int = 4000,
    n_seeds: int = 50,
    parametrization: str = "raw",
    *,
    seeds: Sequence[int] | None = None,
    window: tuple[int, int] | None = None,
) -> dict[str, float]:
    """The additive decomposition: the mean window error with noise only, drift only, the initial error only
    and all three (the same draws), their sum and ``rel_gap = (sum - joint) / joint``, with the analytic
    value of each part (``analytic_*``; exactly additive in expectation)."""
    parts = {
        "noise": problem.with_scales(delta=0.0, init_std=0.0),
        "drift": problem.with_scales(noise_std=0.0, init_std=0.0),
        "init": problem.with_scales(delta=0.0, noise_std=0.0),
        "joint": problem,
    }
    win = default_window(problem, steps) if window is None else window
    out: dict[str, float] = {}
    for name, prob in parts.items():
        res = track(
            prob,
            method,
            lr,
            beta,
            steps,
            n_seeds,
            parametrization,
            seeds=seeds,
            window=win,
            record_every=max(1, steps),
        )
        out[name] = res.value
        out[f"analytic_{name}"] = float(res.extras["analytic"])
    out["sum"] = out["noise"] + out["drift"] + out["init"]
    out["rel_gap"] = (out["sum"] - out["joint"]) / out["joint"] if out["joint"] > 0 else math.nan
    return out


# ------------------------------------------------------------------------------------------------- analytic
def _measure_vector(method: str, beta: torch.Tensor, sequence: str) -> torch.Tensor:
    c1 = beta if (method == "nesterov" and sequence == "gradient") else torch.zeros_like(beta)
    return torch.stack([torch.ones_like(beta), c1], -1)


@torch.no_grad()
def analytic_error_curve(
    method: str,
    lr: Any,
    beta: Any,
    eigenvalues: torch.Tensor,
    steps: int,
    *,
    drift: str = "random_walk",
    delta: float = 0.0,
    noise_std: float = 0.0,
    init_std: float = 0.0,
    switch_every: int = 200,
    omega: float = 2 * math.pi / 1000,
    sequence: str = "gradient",
) -> torch.Tensor:
    """The exact :math:`E\\lVert e_t\\rVert^2`, t = 0..steps-1, for raw steps ``lr`` and momenta ``beta``
    (numbers or 1-D tensors of K settings; returns ``[K, steps]``), on the drifting quadratic with these
    ``eigenvalues`` (``d`` of them), drift kind and scales (see :mod:`optarium.problems.drifting`; ``x_0 =
    theta_0 + init_std N(0, I)``, ``m_0 = 0``)."""
    from optarium.problems.drifting import DRIFTS

    check_choice("method", method, METHODS)
    check_choice("drift", drift, DRIFTS)
    check_choice("sequence", sequence, SEQUENCES)
    steps = check_int("steps", steps, minimum=1)
    delta, noise_std = check_nonnegative("delta", delta), check_nonnegative("noise_std", noise_std)
    init_std = check_nonnegative("init_std", init_std)
    lr_t = torch.as_tensor(lr, dtype=_F64).reshape(-1)
    beta_t = torch.as_tensor(beta, dtype=_F64).reshape(-1)
    lr_t, beta_t = torch.broadcast_tensors(lr_t, beta_t)
    lam = eigenvalues.to(_F64)
    d = lam.numel()
    m = iteration_matrix(method, lr_t.unsqueeze(1), beta_t.unsqueeze(1), lam.unsqueeze(0))  # [K, d, 2, 2]
    a, b, c, dd = m[..., 0, 0], m[..., 0, 1], m[..., 1, 0], m[..., 1, 1]  # elementwise 2x2 algebra
    aa, ab2, bb = a * a, 2 * a * b, b * b
    ac, ad_bc, bd = a * c, a * dd + b * c, b * dd
    cc, cd2, dd2 = c * c, 2 * c * dd, dd * dd
    c1 = _measure_vector(method, beta_t, sequence)[:, 1].unsqueeze(1)  # [K, 1]: c = (1, c1)
    k = lr_t.numel()
    q_noise = ((lr_t * noise_std) ** 2).unsqueeze(1)  # [K, 1]
    p00 = torch.full((k, d), init_std**2, dtype=_F64)
    p01 = torch.zeros(k, d, dtype=_F64)
    p11 = torch.zeros(k, d, dtype=_F64)
    drift_var = delta**2 / d
    kk = check_int("switch_every", switch_every, minimum=1)
    # deterministic drifts: mean responses to unit inputs (averaged over the random direction exactly)
    n_det = {"linear": 1, "rotation": 2}.get(drift, 0) if delta > 0 else 0
    mu0 = torch.zeros(n_det, k, d, dtype=_F64)
    mu1 = torch.zeros(n_det, k, d, dtype=_F64)
    inputs = torch.ones(max(n_det, 1), steps, dtype=_F64)
    if drift == "rotation" and n_det:
        r = 1.0 / (2.0 * math.sin(omega / 2))
        tt = torch.arange(steps + 1, dtype=_F64) * omega
        ca, sb = r * (torch.cos(tt) - 1.0), r * torch.sin(tt)
        inputs = torch.stack([ca[1:] - ca[:-1], sb[1:] - sb[:-1]])  # [2, T]
    out = torch.empty(k, steps, dtype=_F64)
    for t in range(steps):
        val = (p00 + 2 * c1 * p01 + c1 * c1 * p11).sum(-1)
        if n_det:
            cm = mu0 + c1 * mu1  # [n_det, K, d]
            val = val + drift_var * (cm * cm).sum(0).sum(-1)
        out[:, t] = val
        n00 = aa * p00 + ab2 * p01 + bb * p11 + q_noise
        n01 = ac * p00 + ad_bc * p01 + bd * p11 + q_noise
        n11 = cc * p00 + cd2 * p01 + dd2 * p11 + q_noise
        if (drift == "random_walk" and delta > 0) or (drift == "switch" and delta > 0 and (t + 1) % kk == 0):
            n00 = n00 + drift_var
        p00, p01, p11 = n00, n01, n11
        if n_det:
            mu0, mu1 = a * mu0 + b * mu1 - inputs[:, t].view(n_det, 1, 1), c * mu0 + dd * mu1
    return out


def analytic_tracking_error(
    problem: DriftingQuadratic,
    method: str,
    lr: Any,
    beta: Any,
    steps: int,
    *,
    window: tuple[int, int] | None = None,
    sequence: str = "gradient",
) -> Any:
    """The exact expected window mean of :math:`\\lVert e_t\\rVert^2` for ``problem`` (raw ``lr``): a float
    for scalar ``lr`` and ``beta``, else a ``[K]`` tensor."""
    win = default_window(problem, steps) if window is None else window
    curve = analytic_error_curve(
        method,
        lr,
        beta,
        problem.eigenvalues,
        steps,
        drift=problem.drift,
        delta=problem.delta,
        noise_std=problem.noise_std,
        init_std=problem.init_std,
        switch_every=problem.switch_every,
        omega=problem.omega,
        sequence=sequence,
    )
    vals = curve[:, win[0] : win[1]].mean(1)
    scalar = torch.as_tensor(lr).dim() == 0 and torch.as_tensor(beta).dim() == 0
    return float(vals[0]) if scalar else vals


def stationary_error(
    method: str,
    lr: Any,
    beta: Any,
    eigenvalues: torch.Tensor,
    *,
    noise_std: float = 0.0,
    drift_var: float = 0.0,
    sequence: str = "gradient",
) -> torch.Tensor:
    """The stationary :math:`E\\lVert e\\rVert^2` summed over modes, from the per-mode discrete Lyapunov
    equations :math:`P = M P M^\\top + Q`, :math:`Q = \\eta^2\\sigma^2 \\mathbf 1\\mathbf 1^\\top +
    q\\,e_1 e_1^\\top` (``drift_var`` q: the per-coordinate variance of one random-walk step, δ²/d).
    ``[K]`` for K settings (``lr`` raw, ``beta``); +inf where the iteration is unstable."""
    check_choice("method", method, METHODS)
    check_choice("sequence", sequence, SEQUENCES)
    noise_std, drift_var = (
        check_nonnegative("noise_std", noise_std),
        check_nonnegative("drift_var", drift_var),
    )
    lr_t = torch.as_tensor(lr, dtype=_F64).reshape(-1)
    beta_t = torch.as_tensor(beta, dtype=_F64).reshape(-1)
    lr_t, beta_t = torch.broadcast_tensors(lr_t, beta_t)
    lam = eigenvalues.to(_F64)
    m = iteration_matrix(method, lr_t.unsqueeze(1), beta_t.unsqueeze(1), lam.unsqueeze(0))  # [K, d, 2, 2]
    k, d = m.shape[0], m.shape[1]
    q = (lr_t * noise_std).pow(2).view(k, 1, 1, 1) * torch.ones(2, 2, dtype=_F64)
    q = q + drift_var * torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=_F64)
    q = q.expand(k, d, 2, 2)
    kron = torch.einsum("...ij,...kl->...ikjl", m, m).reshape(k, d, 4, 4)
    eye = torch.eye(4, dtype=_F64)
    vec_p = torch.linalg.solve(eye - kron, q.reshape(k, d, 4, 1)).reshape(k, d, 2, 2)
    c = _measure_vector(method, beta_t, sequence).view(k, 1, 2)
    val = torch.einsum("kdi,kdij,kdj->k", c.expand(k, d, 2), vec_p, c.expand(k, d, 2))
    rho = torch.linalg.eigvals(m).abs().amax((-1, -2))
    return torch.where(rho < 1.0, val, torch.full_like(val, math.inf))


# ------------------------------------------------------------------------------------------- conformance
def _case_solve(*, dtype: Any = None, device: Any = "cpu", seed: int = 0, **overrides: Any) -> Result:
    if dtype not in (None, torch.float64, "float64"):
        raise TypeError(f"dtype: the tracking simulator is float64 only, got {dtype}")
    args: dict[str, Any] = {"method": "heavy_ball", "lr": 0.5, "beta": 0.5, "steps": 20, "n_seeds": 3}
    args.update(overrides)
    prob = DriftingQuadratic(dim=4, drift="random_walk", delta=0.05, noise_std=0.2, init_std=1.0, seed=seed)
    return track(prob, **args)


def solver_cases() -> list[SolverCase]:
    """The case of :func:`track` for :mod:`optarium.testing.solvers`: heavy ball on a 4-d drifting
    quadratic."""
    no_tol = (
        "a tracking simulator has no stopping tolerance (it runs the horizon, status max_iter); its "
        "known-optimum checks are tests/optim/test_momentum_tracking.py (torch.optim.SGD equality, the "
        "spec's Lyapunov values, lags and noise floor)"
    )
    return [
        SolverCase(
            name="momentum-tracking",
            solve=_case_solve,
            statuses={
                "max_iter": {},
                # SGD with step 2.5 > 2/L: the error grows 1.5x per step and overflows
                "diverged": {"method": "sgd", "lr": 2.5, "beta": 0.0, "steps": 2000},
            },
            max_iter=20,
            tolerance_holds=lambda r: True,
            optimality=lambda r: 0.0,
            optimality_tol=0.0,
            invalid=[
                ({"beta": 1.0}, "beta"),
                ({"lr": 0.0}, "lr"),
                ({"method": "adam"}, "method"),
                ({"steps": 0}, "steps"),
                ({"parametrization": "scaled"}, "parametrization"),
            ],
            stochastic=True,
            dtypes=("float64",),
            exempt={
                "converged": no_tol,
                "optimality": no_tol,
                "timeout": "no time budget: one batched program over a fixed horizon (a deadline is checked "
                "by the experiment's batched_errors(check=...) instead)",
                "dtype_device": "float64 on the CPU by design (bitwise agreement with torch.optim.SGD and "
                "the exact analytic values are float64 checks in tests/optim/test_momentum_tracking.py)",
            },
        )
    ]
