r"""CVaR policy gradient boosted with quantile gradients (cvar-quantile-pg).

Paper: Y. Luo, E. Delage, "Boosting CVaR Policy Optimization with Quantile Gradients", ICML 2026,
arXiv:2601.22100. No algorithm box, hyperparameters or code were reachable; this module follows the spec
``shared/papers/cvar-quantile-pg.md`` (paper abstract + third-party summaries), and everything the spec marks
as "ours" is a reconstruction:

- CVaR-PG (Tamar et al. 2015): :func:`cvar_pg_surrogate`, weight ``1{R <= q} (R - q) / (alpha N)`` with
  ``q`` the ``ceil(alpha N)``-th smallest return.
- The expected-quantile augmentation ``J = CVaR_alpha + lam E_{u~U(0, alpha)} VaR_u`` (found in spirit);
  the estimator ``g_CVaR + lam g_Q`` is a heuristic ascent direction (the density factor of the exact
  quantile gradient is dropped, spec Component 2).
- A state-only quantile critic ``v(s, H - t, u)`` trained by quantile TD (:func:`quantile_td_loss`,
  Huber-smoothed pinball loss with ``kappa``; the paper's operator with ``max_a`` replaced by ``a ~ pi``:
  policy evaluation). Tabular here: one table per (cell, remaining time) on a fixed grid of ``n_u`` levels,
  kept non-decreasing in ``u`` by sorting after each step (the spec's "sort on a fixed grid" option).
- The local quantile advantage (:func:`quantile_advantage`):
  ``A = mean_j [beta_j - 1{r + gamma v(s', u') < v(s, beta_j)}]``, ``beta_j ~ U(0, alpha)``, ties
  randomised (``tie_break="random"``), smoothed by ``kappa`` when positive; standardised by
  ``max(batch std, 1e-8)`` before weighting ``grad log pi`` at every step of every trajectory.
- The history-aware ("budget") advantage (spec Component 4, alternative; ``quantile_advantage="budget"``):
  batch quantiles ``q_beta_j`` of the returns (``beta_j ~ U(0, alpha)``), risk budgets
  ``c_t = (q - G_{<t}) / gamma^t`` (:func:`risk_budgets`), the critic inverted on its grid
  (:func:`quantile_cdf`, ``F_s(c) = #{j : v_j(s) <= c + tol} / n_u``, ``tol`` = half a reward unit since
  the grid's returns are integers) and ``A_t = F_{s_t}(c_t) - F_{s_{t+1}}(c_{t+1})``
  (:func:`budget_advantage`, terminal ``F = 1{c >= 0}``): it telescopes to ``F_{s_0}(q) - 1{R <= q}`` and is
  unbiased for the QPO/VaR direction with an exact ``F`` and a fixed ``q`` (both tested).

Baselines of the paper's related work, on the same tabular policy and SGD step (no method is tuned, ours
included; each keeps its source's defaults):

- ``"cesor"`` (Greenberg et al., NeurIPS 2022; update rules read from their code, ido90/CeSoR ``GCVaR.py``
  and ``CEM.py``): soft risk ``alpha'_k`` linear from 1 to ``alpha`` over the first 60% of the iterations
  (their GuardedMaze setting ``soft_cvar=0.6``); the cross-entropy sampler draws the first 20% of each batch
  from the original guard probability ``p`` and the rest from ``phi`` with likelihood-ratio weights clipped
  to [1/5, 5]; ``q`` is the ``alpha'``-percentile of the original-distribution returns (the weighted mean at
  ``alpha' = 1``); the loss ``-sum_sel w (R - q) log p / sum_sel w`` over ``R < q``; ``phi`` is refit every
  iteration to the elite (returns below the larger of the ``0.2 (1 - 0.2)``-quantile and the reference
  ``alpha``-quantile). Our adaptation: their maze's context is a per-episode guard probability drawn from a
  Beta law; ours is the per-entry Bernoulli guard, so the CE family is Bernoulli(``phi``) per guarded entry
  and the refit its weighted MLE.
- ``"mix"`` (Luo et al., RLC 2024): ``pi(a|s) = w(s) pi'(a|s) + (1 - w(s)) pi^n(a|s)`` (found); ``(w, pi')``
  follow CVaR-PG through the mixture's log-probability and ``pi^n`` follows REINFORCE on every episode (ours:
  the paper trains ``pi^n`` with an off-policy risk-neutral learner; on-policy REINFORCE is the tabular
  analogue).
- ``"pcvar"`` (predictive CVaR PG, Kim & Min, ICML 2024; abstract: "individual cost terms are reweighted in
  proportion to their predicted contribution"): :func:`predictive_cvar_weights`, each reward weighted by the
  predicted tail probability ``P(R <= q | s_{t+1}, G_{<=t})``; ours: that probability is read from the same
  quantile critic (``F`` above) instead of a separately trained classifier (unbiased with an exact predictor,
  tested).

Deviations / missing (stated): the MLP policy and the MLP critic with a cosine embedding live with the
continuous ``RiskyPointNav`` in :mod:`optarium.rl.cvar_pointnav` (local advantage only); ``train`` is tabular
(softmax logits per cell, SGD) on :class:`optarium.rl.cvar_envs.GuardedGrid`; the level perturbation ``eps``
of the paper's operator is not used (spec default 0). The interface differs from the spec's sketch in that
:func:`quantile_advantage` takes the critic values already evaluated at the sampled levels. Returns are
normalised by the horizon inside the critic (``kappa`` is in those units). Rollout, critic and advantage
random streams are separate generators (``derive_seed(seed, "rollout" | "critic" | "adv")``; the critic
predicts on the fixed grid of ``n_u`` levels and draws ``n_target`` target levels from it per transition), so
``lam = 0`` reproduces CVaR-PG exactly (critic skipped) in either advantage mode. The tie rule ``1{x < q} + U
1{x = q}`` gives a zero-mean advantage on atoms only on average over a uniform level, not at a fixed ``beta``
(tested).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from optarium._core.result import Result, Trace
from optarium._core.seeding import derive_seed
from optarium._core.validation import check_choice, check_in_range, check_int, check_nonnegative

__all__ = [
    "METHODS",
    "budget_advantage",
    "cvar_pg_surrogate",
    "empirical_cvar",
    "empirical_var",
    "law_cvar",
    "law_var",
    "predictive_cvar_weights",
    "quantile_advantage",
    "quantile_cdf",
    "quantile_td_loss",
    "risk_budgets",
    "soft_risk_level",
    "tabular_budget_advantage",
    "train",
]

METHODS = ("cvar-qpg", "reinforce", "qpo", "cesor", "mix", "pcvar")


def _alpha(alpha: float) -> float:
    return check_in_range("alpha", alpha, 0.0, 1.0, low_inclusive=False)


def _returns(returns: torch.Tensor) -> torch.Tensor:
    if not isinstance(returns, torch.Tensor) or returns.ndim != 1 or returns.numel() == 0:
        raise ValueError("returns: must be a non-empty 1-d tensor")
    if not bool(torch.isfinite(returns).all()):
        raise ValueError("returns: must be finite")
    return returns


def _k(n: int, alpha: float) -> int:
    k = math.ceil(alpha * n - 1e-12)
    if alpha * n < 1 - 1e-12:
        raise ValueError(f"alpha: alpha * N must be >= 1, got alpha={alpha}, N={n}")
    return k


def empirical_var(returns: torch.Tensor, alpha: float) -> torch.Tensor:
    """Lower empirical ``alpha``-quantile: the ``ceil(alpha N)``-th smallest return."""
    r = _returns(returns)
    a = _alpha(alpha)
    return torch.sort(r).values[_k(r.numel(), a) - 1]


def empirical_cvar(returns: torch.Tensor, alpha: float) -> torch.Tensor:
    """``(1/alpha) int_0^alpha VaR_u du`` of the empirical law (correct with atoms)."""
    r = _returns(returns)
    a = _alpha(alpha)
    n = r.numel()
    k = _k(n, a)
    x = torch.sort(r).values
    return (x[: k - 1].sum() / n + (a - (k - 1) / n) * x[k - 1]) / a


def _law(values: torch.Tensor, probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    order = torch.argsort(values)
    return values[order], torch.cumsum(probs[order], 0) / probs.sum()


def law_var(values: torch.Tensor, probs: torch.Tensor, alpha: float) -> torch.Tensor:
    """``inf{x : F(x) >= alpha}`` of a discrete law."""
    a = _alpha(alpha)
    v, F = _law(values, probs)
    i = int(torch.searchsorted(F, torch.tensor(a - 1e-12, dtype=F.dtype)))
    return v[min(i, v.numel() - 1)]


def law_cvar(values: torch.Tensor, probs: torch.Tensor, alpha: float) -> torch.Tensor:
    """``(1/alpha) int_0^alpha VaR_u du`` of a discrete law."""
    a = _alpha(alpha)
    v, F = _law(values, probs)
    lo = torch.cat([F.new_zeros(1), F[:-1]])
    mass = (torch.clamp(F, max=a) - torch.clamp(lo, max=a)).clamp_min(0.0)
    return (mass * v).sum() / a


def cvar_pg_surrogate(logp_sum: torch.Tensor, returns: torch.Tensor, alpha: float) -> torch.Tensor:
    """A loss whose gradient is ``-g_CVaR``: ``-(1/(alpha N)) sum_i 1{R_i <= q} (R_i - q) logp_sum_i``."""
    r = _returns(returns.detach())
    if logp_sum.shape != r.shape:
        raise ValueError(f"logp_sum: shape {tuple(logp_sum.shape)} differs from returns {tuple(r.shape)}")
    a = _alpha(alpha)
    q = empirical_var(r, a)
    w = torch.where(r <= q, r - q, torch.zeros_like(r)) / (a * r.numel())
    return -(w * logp_sum).sum()


def _huber_psi(delta: torch.Tensor, u: torch.Tensor, kappa: float) -> torch.Tensor:
    """``d rho^kappa_u / d delta = |u - 1{delta<0}| clip(delta/kappa, -1, 1)`` (kappa=0: step form)."""
    w = torch.abs(u - (delta < 0).to(delta.dtype))
    if kappa == 0:
        return w * torch.sign(delta)
    return w * torch.clamp(delta / kappa, -1.0, 1.0)


def quantile_td_loss(
    v_pred: torch.Tensor,
    v_next: torch.Tensor,
    rewards: torch.Tensor,
    dones: torch.Tensor,
    levels: torch.Tensor,
    gamma: float = 1.0,
    kappa: float = 0.01,
) -> torch.Tensor:
    """Quantile-TD loss ``mean_{b,j,k} rho^kappa_{u_j}(r_b + gamma (1-d_b) v_next[b,k] - v_pred[b,j])``.

    ``v_pred`` (B, M) at ``levels`` (M,) or per transition (B, M) (IQN-style sampling), ``v_next`` (B, K)
    (detached target), ``rho^kappa_u(d) =
    |u - 1{d<0}| H_kappa(d) / kappa`` (Huber), the pinball loss ``|u - 1{d<0}| |d|`` at ``kappa = 0``.
    """
    kappa = check_nonnegative("kappa", kappa)
    check_in_range("gamma", gamma, 0.0, 1.0)
    if v_pred.ndim != 2 or levels.shape not in (v_pred.shape[1:], v_pred.shape):
        raise ValueError("v_pred: must be (B, M) with levels of shape (M,) or (B, M)")
    target = rewards[:, None] + gamma * (1 - dones.to(v_pred.dtype))[:, None] * v_next.detach()
    delta = target[:, None, :] - v_pred[:, :, None]
    u = levels[None, :, None] if levels.ndim == 1 else levels[:, :, None]
    w = torch.abs(u - (delta.detach() < 0).to(delta.dtype))
    if kappa == 0:
        return (w * delta.abs()).mean()
    a = delta.abs()
    h = torch.where(a <= kappa, 0.5 * delta * delta, kappa * (a - 0.5 * kappa))
    return (w * h / kappa).mean()


def quantile_advantage(
    v_beta: torch.Tensor,
    targets: torch.Tensor,
    betas: torch.Tensor,
    kappa: float = 0.0,
    tie_break: str = "random",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Local quantile advantage ``mean_j [beta_j - step(targets - v_beta[:, j])]`` per transition.

    ``v_beta`` (B, J): critic at ``(s, beta_j)``; ``targets`` (B,): ``r + gamma (1-d) v(s', u')``; ``betas``
    (B, J) or (J,). ``step`` is the indicator ``1{delta < 0}`` (ties: ``U ~ U(0,1)`` when
    ``tie_break="random"``, 0 when ``"none"``) at ``kappa = 0``, else the Huber-smoothed derivative.
    """
    kappa = check_nonnegative("kappa", kappa)
    check_choice("tie_break", tie_break, ("random", "none"))
    delta = targets[:, None] - v_beta
    b = betas.expand_as(v_beta)
    if kappa > 0:
        return _huber_psi(delta, b, kappa).mean(1)
    ind = (delta < 0).to(v_beta.dtype)
    if tie_break == "random":
        u = torch.rand(delta.shape, generator=generator, dtype=v_beta.dtype)
        ind = ind + u * (delta == 0).to(v_beta.dtype)
    return (b - ind).mean(1)


def quantile_cdf(v_grid: torch.Tensor, c: torch.Tensor, tol: float = 0.0) -> torch.Tensor:
    """``F(c) = #{j : v_j <= c + tol} / n_u``: the CDF at ``c`` of the law whose quantiles are ``v_grid``.

    ``v_grid`` (..., n_u): a critic's values on the midpoint grid ``(j + 1/2)/n_u`` (the law with ``n_u``
    atoms of mass ``1/n_u``, the grid inversion of the spec's ``F_s(c) = sup{u : v(s, u) <= c}``);
    ``c`` (..., J) budgets; returns (..., J). ``tol`` >= 0 absorbs critic error around return atoms.
    """
    tol = check_nonnegative("tol", tol)
    if v_grid.shape[:-1] != c.shape[:-1]:
        raise ValueError(
            f"c: leading shape {tuple(c.shape[:-1])} differs from v_grid {tuple(v_grid.shape[:-1])}"
        )
    return (v_grid[..., None, :] <= c[..., :, None] + tol).to(v_grid.dtype).mean(-1)


def risk_budgets(
    rewards: torch.Tensor, q: torch.Tensor, gamma: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Risk budgets ``c_t = (q - G_{<t}) / gamma^t`` before and ``c_{t+1}`` after each step.

    ``rewards`` (N, T) (zero after the episode ends), ``q`` (J,) or (N, J) trajectory-level quantiles;
    ``G_{<t} = sum_{k<t} gamma^k r_k``. Returns ``(c_now, c_next)``, each (N, T, J).
    """
    gamma = check_in_range("gamma", gamma, 0.0, 1.0, low_inclusive=False)
    if rewards.ndim != 2:
        raise ValueError("rewards: must be (N, T)")
    T = rewards.shape[1]
    disc = gamma ** torch.arange(T, dtype=rewards.dtype)
    dr = rewards * disc
    g_after = torch.cumsum(dr, 1)
    g_before = g_after - dr
    qq = q.expand(rewards.shape[0], -1) if q.ndim == 1 else q
    c_now = (qq[:, None, :] - g_before[..., None]) / disc[None, :, None]
    c_next = (qq[:, None, :] - g_after[..., None]) / (disc * gamma)[None, :, None]
    return c_now, c_next


def budget_advantage(
    cdf_now: torch.Tensor, cdf_next: torch.Tensor, c_next: torch.Tensor, dones: torch.Tensor, tol: float = 0.0
) -> torch.Tensor:
    """History-aware ("budget") quantile advantage ``A_t = mean_j [F_{s_t}(c_t) - F_{s_{t+1}}(c_{t+1})]``.

    ``cdf_now``/``cdf_next`` (N, T, J): the critic's ``P(Z(s) <= c)`` at ``(s_t, c_t)`` and
    ``(s_{t+1}, c_{t+1})``; at a terminal step (``dones``, (N, T)) the return-to-go is 0 and the next CDF is
    exactly ``1{c_{t+1} >= -tol}``. Along a trajectory the sum telescopes to ``F_{s_0}(q) - 1{R <= q}``, so
    with an exact ``F`` and a fixed ``q`` the estimator ``sum_t A_t grad log pi_t`` is unbiased for the
    VaR direction ``E[(beta - 1{R <= q_beta}) grad log p(tau)]`` (spec, Component 4, alternative).
    """
    term = (c_next >= -tol).to(cdf_now.dtype)
    nxt = torch.where(dones[..., None], term, cdf_next)
    return (cdf_now - nxt).mean(-1)


def predictive_cvar_weights(
    rewards: torch.Tensor, tail_prob_next: torch.Tensor, q: torch.Tensor | float, gamma: float = 1.0
) -> torch.Tensor:
    """Per-step weights of the predictive CVaR policy gradient (Kim & Min, ICML 2024; our reading).

    ``W_t = (G_{<=t} - q) xi_{t+1} + sum_{t' > t} gamma^{t'} r_{t'} xi_{t'+1}``, ``xi_{k} = P(R <= q | h_k)``
    the predicted tail probability after step ``k - 1`` (``tail_prob_next`` (N, T); at the terminal step the
    indicator ``1{R <= q}``). The CVaR gradient estimate is ``(1/(alpha N)) sum_{i,t} W_t grad log pi_t``:
    each reward term is weighted by its predicted contribution to the tail. Replacing every ``xi`` by the
    terminal indicator gives CVaR-PG's ``(R - q) 1{R <= q}`` at every step (tested).
    """
    gamma = check_in_range("gamma", gamma, 0.0, 1.0)
    T = rewards.shape[1]
    dr = rewards * gamma ** torch.arange(T, dtype=rewards.dtype)
    g_after = torch.cumsum(dr, 1)
    future = torch.flip(torch.cumsum(torch.flip(dr * tail_prob_next, [1]), 1), [1]) - dr * tail_prob_next
    return (g_after - q) * tail_prob_next + future


def soft_risk_level(k: int, iters: int, alpha: float, ratio: float = 0.6) -> float:
    """CeSoR's soft risk level: linear from 1 to ``alpha`` over the first ``ratio * iters`` iterations."""
    if ratio > 0 and k < ratio * iters:
        return 1.0 - (k / (ratio * iters)) * (1.0 - alpha)
    return alpha


def _interp(table: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Linear interpolation of ``table`` (B, n_u) on the grid ``(j + 1/2)/n_u`` at levels ``u`` (B, J)."""
    n_u = table.shape[1]
    x = (u * n_u - 0.5).clamp(0, n_u - 1)
    i0 = x.floor().long().clamp(max=n_u - 2) if n_u > 1 else x.floor().long()
    f = x - i0.to(x.dtype)
    v0 = table.gather(1, i0)
    v1 = table.gather(1, (i0 + 1).clamp(max=n_u - 1))
    return v0 + f * (v1 - v0)


def train(
    env: Any,
    method: str = "cvar-qpg",
    alpha: float = 0.1,
    lam: float = 1.0,
    lam_schedule: str = "constant",
    n_episodes: int = 32,
    iters: int = 200,
    actor_lr: float = 0.1,
    critic_lr: float = 0.05,
    critic_epochs: int = 2,
    n_target: int = 8,
    n_u: int = 32,
    n_levels: int = 8,
    kappa: float = 0.0,
    gamma: float = 1.0,
    eval_every: int = 10,
    seed: int = 0,
    quantile_advantage: str = "local",
    budget_tol: float = 0.5,
    soft_risk_ratio: float = 0.6,
    ce_orig_frac: float = 0.2,
    ce_internal_alpha: float = 0.2,
    ce_w_clip: float = 5.0,
) -> Result:
    """Tabular policy optimisation on ``env`` (a :class:`~optarium.rl.cvar_envs.GuardedGrid`).

    ``method``: ``"cvar-qpg"`` (ours; ``lam = 0`` is CVaR-PG; ``quantile_advantage="local" | "budget"``),
    ``"reinforce"`` (batch-mean baseline), ``"qpo"`` (Monte-Carlo quantile PG over the tail,
    ``mean_j (beta_j - 1{R <= q_beta_j})``, no critic), ``"cesor"`` (Greenberg et al. 2022: soft risk level
    ``1 -> alpha`` over ``soft_risk_ratio`` of the run and a cross-entropy sampler of the guard probability
    with clipped likelihood-ratio weights), ``"mix"`` (Luo et al. 2024: ``pi = w(s) pi' + (1 - w(s)) pi^n``,
    ``(w, pi')`` by CVaR-PG, ``pi^n`` by REINFORCE on all episodes) or ``"pcvar"`` (Kim & Min 2024: per-step
    rewards weighted by their predicted tail probability, :func:`predictive_cvar_weights`, predicted by the
    same quantile critic). History per iteration: sampled ``cvar``, ``var``, ``mean``, ``frac_used`` (share of
    trajectories with a non-zero weight), ``grad_norm_cvar``, ``grad_norm_q``; ``extras["evals"]``: rows
    (iteration, exact CVaR, exact mean, safe-route probability) of the stochastic policy every
    ``eval_every`` iterations.
    """
    from optarium.rl.cvar_envs import exact_return_law, safe_probability

    check_choice("method", method, METHODS)
    check_choice("lam_schedule", lam_schedule, ("constant", "anneal"))
    check_choice("quantile_advantage", quantile_advantage, ("local", "budget"))
    a = _alpha(alpha)
    lam = check_nonnegative("lam", lam)
    kappa = check_nonnegative("kappa", kappa)
    budget_tol = check_nonnegative("budget_tol", budget_tol)
    check_in_range("soft_risk_ratio", soft_risk_ratio, 0.0, 1.0)
    check_in_range("ce_orig_frac", ce_orig_frac, 0.0, 1.0, low_inclusive=False)
    check_in_range("ce_internal_alpha", ce_internal_alpha, 0.0, 1.0, low_inclusive=False)
    ce_w_clip = check_in_range("ce_w_clip", ce_w_clip, 1.0, math.inf)
    n = check_int("n_episodes", n_episodes, minimum=1)
    iters = check_int("iters", iters, minimum=1)
    _k(n, a)
    if method == "pcvar" or (method == "cvar-qpg" and quantile_advantage == "budget"):
        check_in_range("gamma", gamma, 0.0, 1.0, low_inclusive=False)
    H, S = env.horizon, env.n_cells
    dt = torch.float64
    g_roll = torch.Generator().manual_seed(derive_seed(seed, "rollout"))
    g_crit = torch.Generator().manual_seed(derive_seed(seed, "critic"))
    g_adv = torch.Generator().manual_seed(derive_seed(seed, "adv"))
    theta = torch.zeros(S, 4, dtype=dt)
    mix = torch.zeros(S, 9, dtype=dt)  # MIX: [w logit | pi' logits | pi^n logits]
    V = torch.zeros(S, H + 1, n_u, dtype=dt)  # normalised return-to-go quantiles, V[:, 0] = 0
    grid = (torch.arange(n_u, dtype=dt) + 0.5) / n_u
    scale = float(H)
    tol = budget_tol / scale
    phi = float(env.p)  # CeSoR's sampler guard probability
    n_orig = max(1, math.ceil(ce_orig_frac * n))
    rows: list[dict[str, float]] = []
    evals: list[tuple[float, float, float, float]] = []
    t0 = time.perf_counter()
    eval_time = 0.0
    for k in range(iters):
        probs_now = _mix_probs(mix) if method == "mix" else torch.softmax(theta, 1)
        if (k % eval_every) == 0:
            te = time.perf_counter()
            evals.append(_evaluate(env, probs_now, a, k, exact_return_law, safe_probability))
            eval_time += time.perf_counter() - te
        w_is = None
        if method == "cesor":
            p_ep = torch.full((n,), phi, dtype=dt)
            p_ep[:n_orig] = float(env.p)
            ro = env.rollout(probs_now, n, g_roll, p=p_ep)
            p0 = float(env.p)
            e, h = ro["entries"].to(dt), ro["hits"].to(dt)
            lr_ = (
                (p0 / phi) ** h * ((1 - p0) / (1 - phi)) ** (e - h)
                if 0 < phi < 1
                else torch.ones(n, dtype=dt)
            )
            w_is = lr_.clamp(1 / ce_w_clip, ce_w_clip)
            w_is[:n_orig] = 1.0
        else:
            ro = env.rollout(probs_now, n, g_roll)
        R = ro["returns"]
        mask = ro["mask"]
        params = mix if method == "mix" else theta
        th = params.clone().requires_grad_(True)
        logpi = torch.log(_mix_probs(th)) if method == "mix" else torch.log_softmax(th, 1)
        logp = logpi[ro["cells"], ro["actions"]] * mask
        logp_sum = logp.sum(1)
        lam_k = lam * max(0.0, 1 - k / (0.75 * iters)) if lam_schedule == "anneal" else lam
        gq = torch.zeros_like(params)
        q = empirical_var(R, a)
        need_critic = method == "pcvar" or (method == "cvar-qpg" and lam_k > 0)
        if need_critic:
            V = _critic_update(
                V, ro, H, S, n, scale, gamma, kappa, grid, critic_lr, critic_epochs, n_target, g_crit
            )
        if method == "reinforce":
            loss_c = -((R - R.mean()) * logp_sum).sum() / n
            used = float(((R - R.mean()) != 0).to(dt).mean())
        elif method == "qpo":
            betas = torch.rand(n_levels, generator=g_adv, dtype=dt) * a
            qs = torch.stack([empirical_var(R, max(float(b), 1.0 / n)) for b in betas])
            w = (betas[None, :] - (R[:, None] <= qs[None, :]).to(dt)).mean(1)
            loss_c = -(w * logp_sum).sum() / n
            used = float((w != 0).to(dt).mean())
        elif method == "cesor":
            a_k = soft_risk_level(k, iters, a, soft_risk_ratio)
            assert w_is is not None
            if a_k >= 1.0:
                qc = (R * w_is).sum() / w_is.sum()
            else:
                qc = torch.quantile(R[:n_orig], a_k)
            sel = (R < qc).to(dt) * w_is
            norm = float(sel.mean())
            loss_c = -(sel * (R - qc) * logp_sum).mean() / (norm if norm > 0 else 1.0)
            used = float((sel != 0).to(dt).mean())
            phi = _ce_update(R, e, h, w_is, n_orig, a, ce_internal_alpha, phi)
        elif method == "pcvar":
            rew = ro["rewards"] / scale
            qn = (q / scale).reshape(1)
            _, c_next = risk_budgets(rew, qn, gamma)
            tau = H - torch.arange(H)
            s2 = ro["next_cells"]
            cdf_next = quantile_cdf(V[s2, (tau - 1).expand(n, H)], c_next, tol)
            xi = torch.where(ro["dones"][..., None], (c_next >= -tol).to(dt), cdf_next).squeeze(-1) * mask
            W = predictive_cvar_weights(rew, xi, qn, gamma) * scale * mask
            loss_c = -(W * logp).sum() / (a * n)
            used = float(((W != 0).any(1)).to(dt).mean())
        else:
            loss_c = cvar_pg_surrogate(logp_sum, R, a)
            used = float(((R <= q) & (R != q)).to(dt).mean())
            if method == "mix":
                # pi^n (risk-neutral component) follows REINFORCE on all episodes; (w, pi') follow CVaR-PG
                loss_n = -((R - R.mean()) * logp_sum).sum() / n
                (gn,) = torch.autograd.grad(loss_n, th, retain_graph=True)
        (gc,) = torch.autograd.grad(loss_c, th, retain_graph=True)
        if method == "mix":
            gc = torch.cat([gc[:, :5], gn[:, 5:]], 1)
        if method == "cvar-qpg" and lam_k > 0:
            if quantile_advantage == "local":
                full = _local_advantage(V, ro, H, n, scale, gamma, kappa, a, n_levels, g_adv)
            else:
                full = _budget_advantage(V, ro, n, R, scale, gamma, a, n_levels, tol, g_adv)
            full = _standardise(full, mask)
            loss_q = -(full * logp).sum() / n
            (gq,) = torch.autograd.grad(loss_q, th)
        g = gc + lam_k * gq
        if method == "mix":
            mix = mix - actor_lr * g
        else:
            theta = theta - actor_lr * g
        rows.append(
            {
                "step": k,
                "cvar": float(empirical_cvar(R, a)),
                "var": float(q),
                "mean": float(R.mean()),
                "frac_used": used,
                "grad_norm_cvar": float(gc.norm()),
                "grad_norm_q": float(gq.norm()),
            }
        )
    final = _mix_probs(mix) if method == "mix" else torch.softmax(theta, 1)
    evals.append(_evaluate(env, final, a, iters, exact_return_law, safe_probability))
    wall = time.perf_counter() - t0 - eval_time
    extras: dict[str, Any] = {"evals": tuple(evals), "critic": V}
    if method == "cesor":
        extras["ce_guard_prob"] = phi
    return Result(
        x=final,
        value=evals[-1][1],
        status="max_iter",
        n_iter=iters,
        history=Trace.from_rows(rows),
        wall_time_s=max(wall, 0.0),
        extras=extras,
    )


def _mix_probs(p: torch.Tensor) -> torch.Tensor:
    """MIX policy ``w(s) softmax(theta') + (1 - w(s)) softmax(theta^n)`` from the (S, 9) parameter table."""
    w = torch.sigmoid(p[:, :1])
    return w * torch.softmax(p[:, 1:5], 1) + (1 - w) * torch.softmax(p[:, 5:9], 1)


def _ce_update(
    R: torch.Tensor,
    entries: torch.Tensor,
    hits: torch.Tensor,
    w: torch.Tensor,
    n_orig: int,
    alpha: float,
    internal_alpha: float,
    phi: float,
) -> float:
    """CeSoR's cross-entropy step (their CEM module).

    Elite: returns below ``max(q_internal, q_ref)``, ``q_ref`` the ``alpha``-quantile of the
    original-distribution episodes, ``q_internal`` the ``internal_alpha (1 - n_orig/N)``-quantile of the
    batch; then the weighted Bernoulli MLE of the guard probability over the elite, clipped to [0.001, 0.999].
    """
    n = R.numel()
    q_int = torch.quantile(R, internal_alpha * (1 - n_orig / n))
    q_ref = torch.quantile(R[:n_orig], alpha)
    sel = R < torch.maximum(q_int, q_ref)
    den = float((w * entries * sel).sum())
    if den <= 0:
        return phi
    return min(max(float((w * hits * sel).sum()) / den, 0.001), 0.999)


def _steps(ro: dict[str, torch.Tensor], H: int, n: int, scale: float) -> tuple[torch.Tensor, ...]:
    """The steps taken in a grid rollout, flattened: cells, next cells, remaining time, rewards / ``scale``,
    dones (float)."""
    m = ro["mask"].reshape(-1)
    tau = (H - torch.arange(H).repeat(n))[m]
    r = ro["rewards"].reshape(-1)[m] / scale
    d = ro["dones"].reshape(-1)[m].to(r.dtype)
    return ro["cells"].reshape(-1)[m], ro["next_cells"].reshape(-1)[m], tau, r, d


def _critic_update(
    V: torch.Tensor,
    ro: dict[str, torch.Tensor],
    H: int,
    S: int,
    n: int,
    scale: float,
    gamma: float,
    kappa: float,
    grid: torch.Tensor,
    critic_lr: float,
    epochs: int,
    n_target: int,
    g_crit: torch.Generator,
) -> torch.Tensor:
    """Tabular quantile-TD epochs on all transitions; ``V`` kept sorted in ``u`` and 0 at remaining time 0."""
    dt = V.dtype
    s, s2, tau, r, d = _steps(ro, H, n, scale)
    n_u = grid.numel()
    B = r.numel()
    cnt = torch.zeros(S * (H + 1), dtype=dt).index_add_(0, s * (H + 1) + tau, torch.ones_like(r))
    scalev = (B * n_u / cnt.clamp_min(1.0)).reshape(S, H + 1, 1)
    for _ in range(epochs):
        Vp = V.clone().requires_grad_(True)
        jk = torch.randint(n_u, (B, n_target), generator=g_crit)
        v_next = V[s2, tau - 1].gather(1, jk)
        loss = quantile_td_loss(Vp[s, tau], v_next, r, d, grid, gamma, kappa)
        (gv,) = torch.autograd.grad(loss, Vp)
        V = torch.sort(V - critic_lr * gv * scalev, dim=2).values
        V[:, 0] = 0.0
    return V


def _sampled_local_advantage(
    mask: torch.Tensor,
    v_at: Any,
    v_next_at: Any,
    r: torch.Tensor,
    d: torch.Tensor,
    *,
    gamma: float,
    kappa: float,
    alpha: float,
    n_levels: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """The local quantile advantage of the taken steps, as (N, T) (0 where ``mask`` is off).

    Per step: levels ``beta_j ~ U(0, alpha)`` (``n_levels``) and one target level ``u' ~ U(0, 1)``;
    ``v_at(betas)`` the critic at ``(s, beta_j)``, ``v_next_at(u')`` at ``(s', u')``, both (B, ·) over the
    flattened taken steps (``r``, ``d`` (B,)). Shared by the tabular and the MLP critic.
    """
    dt = r.dtype
    B = r.numel()
    betas = torch.rand(B, n_levels, generator=generator, dtype=dt) * alpha
    u2 = torch.rand(B, 1, generator=generator, dtype=dt)
    vb = v_at(betas)
    tgt = r + gamma * (1 - d) * v_next_at(u2).squeeze(1)
    A = quantile_advantage(vb, tgt, betas, kappa=kappa, generator=generator)
    full = torch.zeros(mask.numel(), dtype=dt)
    full[mask.reshape(-1)] = A
    return full.reshape(mask.shape)


def _standardise(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``adv / max(std over the taken steps, 1e-8)`` (the spec's per-batch scaling; finite at zero spread)."""
    sd = float(adv[mask].std()) if int(mask.sum()) > 1 else 0.0
    return adv / max(sd, 1e-8)


def _local_advantage(
    V: torch.Tensor,
    ro: dict[str, torch.Tensor],
    H: int,
    n: int,
    scale: float,
    gamma: float,
    kappa: float,
    a: float,
    n_levels: int,
    g_adv: torch.Generator,
) -> torch.Tensor:
    """The local quantile advantage from the tabular critic ``V``, (n, H)."""
    s, s2, tau, r, d = _steps(ro, H, n, scale)
    return _sampled_local_advantage(
        ro["mask"],
        lambda u: _interp(V[s, tau], u),
        lambda u: _interp(V[s2, tau - 1], u),
        r,
        d,
        gamma=gamma,
        kappa=kappa,
        alpha=a,
        n_levels=n_levels,
        generator=g_adv,
    )


def _budget_advantage(
    V: torch.Tensor,
    ro: dict[str, torch.Tensor],
    n: int,
    R: torch.Tensor,
    scale: float,
    gamma: float,
    a: float,
    n_levels: int,
    tol: float,
    g_adv: torch.Generator,
) -> torch.Tensor:
    """The budget advantage with batch quantiles ``q_beta_j`` (``beta_j ~ U(0, alpha)``), as (n, H)."""
    betas = torch.rand(n_levels, generator=g_adv, dtype=V.dtype) * a
    # empirical_var at every level at once: the ceil(beta N)-th smallest return, beta floored at 1/N
    k = torch.ceil(betas.clamp_min(1.0 / n) * n - 1e-12).long()
    qs = torch.sort(R).values[k - 1] / scale
    return tabular_budget_advantage(V, ro, qs, gamma=gamma, tol=tol, scale=scale)


def tabular_budget_advantage(
    V: torch.Tensor,
    ro: dict[str, torch.Tensor],
    q: torch.Tensor,
    gamma: float = 1.0,
    tol: float = 0.0,
    scale: float = 1.0,
) -> torch.Tensor:
    """:func:`budget_advantage` from a tabular critic ``V`` (cells, remaining time + 1, n_u) on a rollout.

    ``ro``: :meth:`GuardedGrid.rollout` output (rewards divided by ``scale``, the critic's units); ``q`` (J,)
    the trajectory-level quantiles in critic units. Returns (N, T), zero after the episode ends.
    """
    N, T = ro["cells"].shape
    tau = (T - torch.arange(T)).expand(N, T)
    rew = ro["rewards"] / scale
    c_now, c_next = risk_budgets(rew, q, gamma)
    f_now = quantile_cdf(V[ro["cells"], tau], c_now, tol)
    f_next = quantile_cdf(V[ro["next_cells"], tau - 1], c_next, tol)
    return budget_advantage(f_now, f_next, c_next, ro["dones"], tol) * ro["mask"]


def _evaluate(env: Any, probs: torch.Tensor, alpha: float, k: int, law_fn: Any, safe_fn: Any) -> tuple:
    vals, ps = law_fn(env, probs)
    return (float(k), float(law_cvar(vals, ps, alpha)), float((vals * ps).sum()), float(safe_fn(env, probs)))
