"""Tests of optarium.rl.cvar_quantile (cvar-quantile-pg) and its gridworld optarium.rl.cvar_envs."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.rl import cvar_quantile as cq
from optarium.rl.cvar_envs import GuardedGrid, exact_return_law, safe_probability

D = torch.float64
PHI = lambda z: math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)  # noqa: E731
CDF = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731


def _policy(env: GuardedGrid, action: int) -> torch.Tensor:
    p = torch.zeros(env.n_cells, 4, dtype=D)
    p[:, action] = 1.0
    return p


def _long_route(env: GuardedGrid) -> torch.Tensor:
    """S, S, S along column 1; E along row 4; N up column 9 (the 14-move route)."""
    p = torch.zeros(env.n_cells, 4, dtype=D)
    for i, (r, c) in enumerate(env.cells):
        a = 2 if (c == 1 and r < 4) else 1 if r == 4 and c < 9 else 0 if c == 9 else 1
        p[i, a] = 1.0
    return p


# --- estimators -------------------------------------------------------------------------------------------


def test_empirical_var_cvar_match_closed_forms():
    g = torch.Generator().manual_seed(0)
    n, a = 200_000, 0.1
    u = torch.rand(n, generator=g, dtype=D)
    z = torch.randn(n, generator=g, dtype=D)
    assert abs(float(cq.empirical_var(u, a)) - a) < 4 * math.sqrt(a * (1 - a) / n)
    # CVaR of U(0,1) = alpha/2; tail sample sd = alpha/sqrt(12) per point, alpha N points
    assert abs(float(cq.empirical_cvar(u, a)) - a / 2) < 4 * (a / math.sqrt(12)) / math.sqrt(a * n) + 1e-3
    za = -1.2815515655446004
    exact = -PHI(za) / a
    assert abs(float(cq.empirical_cvar(z, a)) - exact) < 4 * 0.4 / math.sqrt(a * n) + 5e-3
    assert torch.allclose(cq.empirical_cvar(z, 1.0), z.mean())


def test_exact_short_and_long_route_laws():
    env = GuardedGrid(p=0.05)
    v, p = exact_return_law(env, _policy(env, 1))
    assert float(p.sum()) == pytest.approx(1.0)
    assert float(cq.law_var(v, p, 0.1)) == -38.0
    assert float(cq.law_cvar(v, p, 0.1)) == pytest.approx(-40.2125)
    assert float((v * p).sum()) == pytest.approx(-12.5)
    lv, lp = exact_return_law(env, _long_route(env))
    assert lv.tolist() == [-14.0] and float(lp[0]) == pytest.approx(1.0)
    assert float(safe_probability(env, _long_route(env))) == pytest.approx(1.0)
    assert float(safe_probability(env, _policy(env, 1))) == 0.0
    # control of the experiment: short route higher mean, long route higher CVaR
    assert float((v * p).sum()) > -14.0 > float(cq.law_cvar(v, p, 0.1))


def test_rollout_matches_exact_law():
    env = GuardedGrid(p=0.05, horizon=12)
    probs = torch.softmax(torch.randn(env.n_cells, 4, generator=torch.Generator().manual_seed(1), dtype=D), 1)
    ro = env.rollout(probs, 20_000, torch.Generator().manual_seed(2))
    v, p = exact_return_law(env, probs)
    mean = float((v * p).sum())
    sd = math.sqrt(float((v * v * p).sum()) - mean**2)
    assert abs(float(ro["returns"].mean()) - mean) < 4 * sd / math.sqrt(20_000)


# --- CVaR-PG ----------------------------------------------------------------------------------------------


def _mix_cvar(theta: torch.Tensor, mu: list[float], sd: list[float], a: float) -> float:
    pi = torch.softmax(theta, 0).tolist()
    F = lambda x: sum(p * CDF((x - m) / s) for p, m, s in zip(pi, mu, sd, strict=True))  # noqa: E731
    lo, hi = -20.0, 20.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if F(mid) < a else (lo, mid)
    q = 0.5 * (lo + hi)
    return (
        sum(p * (m * CDF((q - m) / s) - s * PHI((q - m) / s)) for p, m, s in zip(pi, mu, sd, strict=True)) / a
    )


def test_cvar_pg_gradient_matches_finite_difference():
    mu, sd, a = [0.0, 0.5, 1.0], [1.0, 2.0, 0.5], 0.2
    theta = torch.tensor([0.1, -0.2, 0.3], dtype=D)
    g = torch.Generator().manual_seed(3)
    fd = torch.tensor(
        [
            (_mix_cvar(theta + h, mu, sd, a) - _mix_cvar(theta - h, mu, sd, a)) / 2e-5
            for h in torch.eye(3, dtype=D) * 1e-5
        ]
    )

    def batches(n: int, k: int) -> torch.Tensor:
        out = []
        for _ in range(k):
            th = theta.clone().requires_grad_(True)
            act = torch.multinomial(torch.softmax(theta, 0), n, replacement=True, generator=g)
            r = torch.tensor(mu, dtype=D)[act] + torch.tensor(sd, dtype=D)[act] * torch.randn(
                n, generator=g, dtype=D
            )
            logp = torch.log_softmax(th, 0)[act]
            (gr,) = torch.autograd.grad(cq.cvar_pg_surrogate(logp, r, a), th)
            out.append(-gr)
        return torch.stack(out)

    g1, g2 = batches(10_000, 30), batches(20_000, 15)
    m1, se1 = g1.mean(0), g1.std(0) / math.sqrt(30)
    bias = (m1 - g2.mean(0)).abs()
    assert bool(((m1 - fd).abs() <= 4 * se1 + bias + 1e-3).all()), (m1, fd, se1)


def test_cvar_pg_limits_and_data_usage():
    g = torch.Generator().manual_seed(4)
    r = torch.randn(1000, generator=g, dtype=D)
    logp = torch.zeros(1000, dtype=D, requires_grad=True)
    (w,) = torch.autograd.grad(cq.cvar_pg_surrogate(logp, r, 0.1), logp)
    assert int((w != 0).sum()) == 99  # the ceil(alpha N)-th return has weight R - q = 0
    # alpha = 1: REINFORCE with baseline max return
    (w1,) = torch.autograd.grad(cq.cvar_pg_surrogate(logp, r, 1.0), logp)
    assert torch.allclose(w1, -(r - r.max()) / 1000)
    # tied tail: exactly zero gradient
    tied = torch.cat([torch.full((10,), -40.0, dtype=D), torch.linspace(-30, -10, 90, dtype=D)])
    lp = torch.zeros(100, dtype=D, requires_grad=True)
    (w2,) = torch.autograd.grad(cq.cvar_pg_surrogate(lp, tied, 0.1), lp)
    assert bool((w2 == 0).all())


# --- quantile TD critic -----------------------------------------------------------------------------------


def _fit_critic(kappa: float, steps: int = 600, n_u: int = 16) -> torch.Tensor:
    """Two-state chain A -> B -> end: r_A ~ U(0, 1), r_B ~ Bernoulli(1/2); tabular quantile TD."""
    g = torch.Generator().manual_seed(5)
    grid = (torch.arange(n_u, dtype=D) + 0.5) / n_u
    V = torch.zeros(2, n_u, dtype=D)
    b = 128
    for k in range(steps):
        s = torch.randint(2, (b,), generator=g)
        r = torch.where(
            s == 0, torch.rand(b, generator=g, dtype=D), (torch.rand(b, generator=g, dtype=D) < 0.5).to(D)
        )
        done = s == 1
        jk = torch.randint(n_u, (b, 8), generator=g)
        v_next = V[torch.ones_like(s)].gather(1, jk)
        Vp = V.clone().requires_grad_(True)
        loss = cq.quantile_td_loss(Vp[s], v_next, r, done, grid, 1.0, kappa)
        (gv,) = torch.autograd.grad(loss, Vp)
        cnt = torch.bincount(s, minlength=2).clamp_min(1).to(D)[:, None]
        V = torch.sort(V - 0.1 / (1 + k / 50) * gv * b * n_u / cnt, 1).values
    return V


def test_quantile_critic_converges_to_quantile_function():
    V = _fit_critic(0.0)
    n_u = V.shape[1]
    grid = (torch.arange(n_u, dtype=D) + 0.5) / n_u
    true_b = (grid > 0.5).to(D)
    true_a = 2 * grid  # U(0,1) + Bernoulli(1/2) is uniform on [0, 2]
    assert float((V[1] - true_b).abs().mean()) < 0.05
    assert float((V[0] - true_a).abs().mean()) / 2 < 0.05
    assert bool((V.diff(dim=1) >= 0).all())


def test_huber_kappa_one_drifts_to_expectile():
    V = _fit_critic(1.0, steps=150)
    grid = (torch.arange(V.shape[1], dtype=D) + 0.5) / V.shape[1]
    assert float((V[1] - (grid > 0.5).to(D)).abs().mean()) > 0.1


def test_quantile_td_loss_pinball_value():
    v = torch.tensor([[0.0]], dtype=D)
    loss = cq.quantile_td_loss(
        v,
        torch.zeros(1, 1, dtype=D),
        torch.tensor([-2.0], dtype=D),
        torch.tensor([True]),
        torch.tensor([0.25], dtype=D),
        1.0,
        0.0,
    )
    assert float(loss) == pytest.approx(0.75 * 2.0)


# --- quantile advantage -----------------------------------------------------------------------------------


def test_quantile_advantage_mean_zero_continuous_and_sign():
    g = torch.Generator().manual_seed(6)
    n = 40_000
    act = torch.randint(2, (n,), generator=g)
    r = act.to(D) + torch.randn(n, generator=g, dtype=D)  # arm 1 has mean 1
    betas = torch.tensor([0.05, 0.1, 0.3], dtype=D)
    F = lambda x: 0.5 * CDF(x) + 0.5 * CDF(x - 1)  # noqa: E731
    q = []
    for b in betas.tolist():
        lo, hi = -10.0, 10.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if F(mid) < b else (lo, mid)
        q.append(0.5 * (lo + hi))
    vb = torch.tensor(q, dtype=D).expand(n, 3)
    A = cq.quantile_advantage(vb, r, betas, generator=g)
    assert abs(float(A.mean())) < 4 * float(A.std()) / math.sqrt(n)
    assert float(A[act == 1].mean()) > 0 > float(A[act == 0].mean())


def test_quantile_advantage_atoms_and_tie_break():
    g = torch.Generator().manual_seed(7)
    n = 40_000
    r = (torch.rand(n, generator=g, dtype=D) < 0.5).to(D)  # Bernoulli(1/2), quantile 0 below 1/2, 1 above
    beta = 0.2
    vb = torch.zeros(n, 1, dtype=D)
    A0 = cq.quantile_advantage(vb, r, torch.tensor([beta], dtype=D), tie_break="none")
    assert float(A0.mean()) == pytest.approx(beta)  # the atom effect: mean equals beta
    # randomised ties: zero mean when the level is uniform on (0, 1)
    b = torch.rand(n, 1, generator=g, dtype=D)
    v = (b > 0.5).to(D)
    A = cq.quantile_advantage(v, r, b, tie_break="random", generator=g)
    assert abs(float(A.mean())) < 4 * float(A.std()) / math.sqrt(n)


def test_tied_tail_quantile_term_nonzero():
    # all sampled returns tie at the time-out, but the state-wise quantiles still differ
    vb = torch.tensor([[-0.9], [-0.5], [-0.7]], dtype=D)
    tgt = torch.tensor([-0.6, -0.6, -0.6], dtype=D)
    A = cq.quantile_advantage(vb, tgt, torch.tensor([0.05], dtype=D))
    assert bool((A != 0).any())
    assert A.tolist() == pytest.approx([0.05, 0.05 - 1, 0.05])


# --- training loop ----------------------------------------------------------------------------------------


def _manual_cvar_pg(env: GuardedGrid, iters: int, n: int, alpha: float, lr: float, seed: int) -> torch.Tensor:
    """Plain CVaR-PG with the analytic softmax score (no autograd), same rollout stream."""
    from optarium._core.seeding import derive_seed

    g = torch.Generator().manual_seed(derive_seed(seed, "rollout"))
    theta = torch.zeros(env.n_cells, 4, dtype=D)
    for _ in range(iters):
        probs = torch.softmax(theta, 1)
        ro = env.rollout(probs, n, g)
        R = ro["returns"]
        q = torch.sort(R).values[math.ceil(alpha * n) - 1]
        w = torch.where(R <= q, R - q, torch.zeros_like(R)) / (alpha * n)
        grad = torch.zeros_like(theta)
        wt = (w[:, None] * ro["mask"]).reshape(-1)
        s, a = ro["cells"].reshape(-1), ro["actions"].reshape(-1)
        grad.index_put_((s, a), wt, accumulate=True)
        grad -= torch.zeros_like(theta).index_add_(0, s, wt[:, None] * probs[s])
        theta = theta + lr * grad
    return torch.softmax(theta, 1)


def test_lam_zero_is_cvar_pg_and_determinism():
    env = GuardedGrid(horizon=10)
    res = cq.train(env, "cvar-qpg", alpha=0.25, lam=0.0, n_episodes=8, iters=4, eval_every=100, seed=3)
    ref = _manual_cvar_pg(env, 4, 8, 0.25, 0.1, 3)
    assert torch.allclose(res.x, ref, atol=1e-12)
    a = cq.train(env, "cvar-qpg", alpha=0.25, lam=1.0, n_episodes=8, iters=4, eval_every=2, seed=5)
    b = cq.train(env, "cvar-qpg", alpha=0.25, lam=1.0, n_episodes=8, iters=4, eval_every=2, seed=5)
    assert torch.equal(a.x, b.x) and a.extras["evals"] == b.extras["evals"]
    assert not torch.equal(a.x, res.x)
    hist = a.history
    assert all(math.isfinite(x) for x in hist.metrics["grad_norm_q"])
    assert len(hist) == 4


@pytest.mark.parametrize("method", ["reinforce", "qpo"])
def test_baselines_run(method):
    res = cq.train(GuardedGrid(horizon=10), method, alpha=0.25, n_episodes=8, iters=3, seed=0)
    assert res.n_iter == 3 and torch.allclose(res.x.sum(1), torch.ones(22, dtype=D))


def test_bad_input():
    env = GuardedGrid(horizon=5)
    r = torch.randn(10, dtype=D)
    with pytest.raises(ValueError, match="alpha"):
        cq.empirical_cvar(r, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        cq.empirical_var(r, 1.5)
    with pytest.raises(ValueError, match="alpha"):
        cq.empirical_var(r, 0.05)  # alpha N < 1
    with pytest.raises(ValueError, match="returns"):
        cq.empirical_cvar(torch.tensor([1.0, math.inf], dtype=D), 0.5)
    with pytest.raises(ValueError, match="lam"):
        cq.train(env, lam=-1.0, iters=1)
    with pytest.raises(ValueError, match="kappa"):
        cq.quantile_td_loss(
            torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.zeros(1), torch.zeros(1), 1.0, -0.1
        )
    with pytest.raises(ValueError, match="alpha"):
        cq.train(env, alpha=0.01, n_episodes=32, iters=1)
    with pytest.raises(ValueError, match="method"):
        cq.train(env, method="ppo", iters=1)
    with pytest.raises(ValueError, match="p"):
        GuardedGrid(p=1.5)


def test_gymnasium_env_matches_batched_dynamics():
    from gymnasium.utils.env_checker import check_env

    from optarium.rl.cvar_gym import GuardedGridEnv

    env = GuardedGridEnv(p=0.5)
    check_env(env, skip_render_check=True)
    grid = env.grid
    long = _long_route(grid).argmax(1).tolist()
    obs, info = env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        obs, r, term, trunc, info = env.step(long[obs])
        total += r
        done = term or trunc
    assert total == -14.0 and term and info["remaining"] == 26
    rets = []
    for k in range(400):
        obs, _ = env.reset(seed=k)
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(1)
            total += r
            done = term or trunc
        rets.append(total)
    m = sum(rets) / len(rets)  # short route at p = 0.5: mean -8 - 45, sd 30 sqrt(0.75)
    assert abs(m + 53.0) < 4 * 30 * math.sqrt(0.75) / math.sqrt(400)
    with pytest.raises(ValueError, match="action"):
        env.step(7)


# --- budget advantage and the other CVaR baselines --------------------------------------------------------


def _two_step(n: int, seed: int):
    """s0 -a0-> s1 = a0 -a1-> end; Gaussian rewards; returns the sample and the exact CDFs as closures."""
    th0 = torch.tensor([0.2, -0.1], dtype=D, requires_grad=True)
    th1 = torch.tensor([[0.1, -0.3], [0.4, 0.0]], dtype=D, requires_grad=True)
    mu0, sd0 = torch.tensor([0.0, 0.3], dtype=D), torch.tensor([1.0, 0.5], dtype=D)
    mu1 = torch.tensor([[0.0, 0.5], [-0.2, 0.4]], dtype=D)
    sd1 = torch.tensor([[1.0, 2.0], [0.7, 1.5]], dtype=D)
    g = torch.Generator().manual_seed(seed)
    p0, p1 = torch.softmax(th0.detach(), 0), torch.softmax(th1.detach(), 1)
    a0 = torch.multinomial(p0, n, replacement=True, generator=g)
    r0 = mu0[a0] + sd0[a0] * torch.randn(n, generator=g, dtype=D)
    a1 = torch.multinomial(p1[a0], 1, generator=g).squeeze(1)
    r1 = mu1[a0, a1] + sd1[a0, a1] * torch.randn(n, generator=g, dtype=D)
    score0 = torch.nn.functional.one_hot(a0, 2).to(D) - p0
    score1 = torch.zeros(n, 2, 2, dtype=D)
    score1[torch.arange(n), a0] = torch.nn.functional.one_hot(a1, 2).to(D) - p1[a0]

    def f1(s1: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (p1[s1] * torch.special.ndtr((c[:, None] - mu1[s1]) / sd1[s1])).sum(1)

    def f0(c: float, t0: torch.Tensor, t1: torch.Tensor) -> torch.Tensor:
        q0, q1 = torch.softmax(t0, 0), torch.softmax(t1, 1)
        sd = torch.sqrt(sd0[:, None] ** 2 + sd1**2)
        return (q0[:, None] * q1 * torch.special.ndtr((c - mu0[:, None] - mu1) / sd)).sum()

    def tail(c: float, t0: torch.Tensor, t1: torch.Tensor) -> torch.Tensor:
        """E[min(R - c, 0)] exactly."""
        q0, q1 = torch.softmax(t0, 0), torch.softmax(t1, 1)
        m, sd = mu0[:, None] + mu1, torch.sqrt(sd0[:, None] ** 2 + sd1**2)
        z = (c - m) / sd
        return (
            q0[:, None]
            * q1
            * ((m - c) * torch.special.ndtr(z) - sd * torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi))
        ).sum()

    rewards = torch.stack([r0, r1], 1)
    return dict(
        th0=th0, th1=th1, a0=a0, rewards=rewards, score0=score0, score1=score1, f1=f1, f0=f0, tail=tail
    )


def _check_mean(est: torch.Tensor, exact: torch.Tensor) -> None:
    m, se = est.mean(0), est.std(0) / math.sqrt(est.shape[0])
    assert bool(((m - exact).abs() <= 4 * se + 1e-4).all()), (m, exact, se)


def test_budget_advantage_is_unbiased_for_the_var_direction():
    n, qv = 200_000, -0.8
    e = _two_step(n, 11)
    q = torch.tensor([qv], dtype=D)
    c_now, c_next = cq.risk_budgets(e["rewards"], q)
    assert torch.allclose(c_now[:, 1, 0], qv - e["rewards"][:, 0]) and torch.allclose(
        c_now[:, 0, 0], q.expand(n)
    )
    f_now = torch.stack(
        [e["f0"](qv, e["th0"], e["th1"]).detach().expand(n), e["f1"](e["a0"], c_now[:, 1, 0])], 1
    )
    f_next = torch.stack([e["f1"](e["a0"], c_next[:, 0, 0]), torch.full((n,), 0.5, dtype=D)], 1)
    dones = torch.tensor([[False, True]]).expand(n, 2)
    A = cq.budget_advantage(f_now[..., None], f_next[..., None], c_next, dones)
    R = e["rewards"].sum(1)
    # telescoping: sum_t A_t = F_{s0}(q) - 1{R <= q}
    assert torch.allclose(A.sum(1), f_now[:, 0] - (R <= qv).to(D))
    est = torch.cat([A[:, :1] * e["score0"], A[:, 1:2] * e["score1"].reshape(n, 4)], 1)
    (g0, g1) = torch.autograd.grad(-e["f0"](qv, e["th0"], e["th1"]), (e["th0"], e["th1"]))
    _check_mean(est, torch.cat([g0, g1.reshape(4)]))


def test_predictive_cvar_weights_unbiased_and_cvar_pg_limit():
    n, qv = 200_000, -0.8
    e = _two_step(n, 12)
    rew = e["rewards"]
    R = rew.sum(1)
    ind = (R <= qv).to(D)
    xi = torch.stack([e["f1"](e["a0"], qv - rew[:, 0]), ind], 1)
    W = cq.predictive_cvar_weights(rew, xi, qv)
    est = torch.cat([W[:, :1] * e["score0"], W[:, 1:2] * e["score1"].reshape(n, 4)], 1)
    (g0, g1) = torch.autograd.grad(e["tail"](qv, e["th0"], e["th1"]), (e["th0"], e["th1"]))
    _check_mean(est, torch.cat([g0, g1.reshape(4)]))
    # limit: the terminal indicator as the "prediction" gives CVaR-PG's (R - q) 1{R <= q} at every step
    W_ind = cq.predictive_cvar_weights(rew, ind[:, None].expand(n, 2), qv)
    assert torch.allclose(W_ind, ((R - qv) * ind)[:, None].expand(n, 2))


def test_tabular_budget_advantage_telescopes_on_the_grid():
    env = GuardedGrid(p=0.3, horizon=12)
    g = torch.Generator().manual_seed(13)
    probs = torch.softmax(torch.randn(env.n_cells, 4, generator=g, dtype=D), 1)
    ro = env.rollout(probs, 64, g)
    V = torch.sort(torch.randn(env.n_cells, 13, 16, generator=g, dtype=D) * 5 - 10, 2).values
    V[:, 0] = 0.0
    q = torch.tensor([-12.0, -31.0], dtype=D)
    A = cq.tabular_budget_advantage(V, ro, q)
    f0 = cq.quantile_cdf(V[env.start, 12].expand(64, 16), q.expand(64, 2)).mean(1)
    ind = (ro["returns"][:, None] <= q).to(D).mean(1)
    assert torch.allclose(A.sum(1), f0 - ind)
    assert bool((A[~ro["mask"]] == 0).all())


def test_quantile_cdf_inverts_the_grid():
    n_u = 20
    grid = (torch.arange(n_u, dtype=D) + 0.5) / n_u  # quantiles of U(0, 1)
    c = torch.tensor([[-0.1, 0.0, 0.26, 0.5, 0.999, 1.2]], dtype=D)
    F = cq.quantile_cdf(grid[None], c)
    assert F.tolist()[0] == pytest.approx([0.0, 0.0, 0.25, 0.5, 1.0, 1.0])
    assert cq.quantile_cdf(grid[None], torch.tensor([[0.02]], dtype=D), tol=0.01).item() == pytest.approx(
        0.05
    )


def test_budget_mode_lam_zero_is_cvar_pg_and_runs():
    env = GuardedGrid(horizon=10)
    res = cq.train(
        env, alpha=0.25, lam=0.0, n_episodes=8, iters=4, eval_every=100, seed=3, quantile_advantage="budget"
    )
    assert torch.allclose(res.x, _manual_cvar_pg(env, 4, 8, 0.25, 0.1, 3), atol=1e-12)
    kw = dict(alpha=0.25, lam=1.0, n_episodes=8, iters=4, eval_every=2, seed=5)
    a = cq.train(env, quantile_advantage="budget", **kw)
    b = cq.train(env, quantile_advantage="budget", **kw)
    loc = cq.train(env, quantile_advantage="local", **kw)
    assert torch.equal(a.x, b.x) and not torch.equal(a.x, loc.x)
    assert all(math.isfinite(x) and x > 0 for x in a.history.metrics["grad_norm_q"][1:])


def test_rollout_guard_probability_override_and_counts():
    env = GuardedGrid(p=0.05, horizon=15)
    probs = torch.zeros(env.n_cells, 4, dtype=D)
    probs[:, 1] = 1.0  # the short route: 3 guarded entries
    base = env.rollout(probs, 50, torch.Generator().manual_seed(1))
    same = env.rollout(probs, 50, torch.Generator().manual_seed(1), p=torch.full((50,), 0.05, dtype=D))
    assert all(torch.equal(base[k], same[k]) for k in base)
    assert base["entries"].tolist() == [3] * 50
    assert torch.equal(base["returns"], -8.0 - 30.0 * base["hits"].to(D))
    pv = torch.cat([torch.zeros(25, dtype=D), torch.ones(25, dtype=D)])
    mixed = env.rollout(probs, 50, torch.Generator().manual_seed(1), p=pv)
    assert mixed["hits"].tolist() == [0] * 25 + [3] * 25


def test_cesor_pieces():
    assert cq.soft_risk_level(0, 100, 0.1, 0.6) == 1.0
    assert cq.soft_risk_level(30, 100, 0.1, 0.6) == pytest.approx(0.55)
    assert cq.soft_risk_level(60, 100, 0.1, 0.6) == 0.1 == cq.soft_risk_level(5, 100, 0.1, 0.0)
    from optarium.rl.cvar_quantile import _ce_update

    R = torch.tensor([-10.0, -9.0, -100.0, -70.0, -8.0, -40.0, -9.0, -8.0, -8.0, -8.0], dtype=D)
    entries = torch.tensor([3, 3, 3, 3, 3, 0, 3, 3, 3, 3], dtype=D)
    hits = torch.tensor([0, 0, 3, 2, 0, 0, 0, 0, 0, 0], dtype=D)
    w = torch.tensor([1, 1, 0.5, 2.0, 1, 1, 1, 1, 1, 1], dtype=D)
    # n_orig = 2: q_ref = quantile([-10, -9], 0.1) = -9.9; q_int = quantile(R, 0.16) ~ -61; elite R < -9.9
    phi = _ce_update(R, entries, hits, w, n_orig=2, alpha=0.1, internal_alpha=0.2, phi=0.05)
    # elite {-10 (w 1, 0/3), -100 (w .5, 3/3), -70 (w 2, 2/3), -40 (no entries)}: weighted hits / entries
    assert phi == pytest.approx((0.5 * 3 + 2 * 2) / (1 * 3 + 0.5 * 3 + 2 * 3))
    assert _ce_update(R, entries * 0, hits * 0, w, 2, 0.1, 0.2, 0.3) == 0.3


@pytest.mark.parametrize("method", ["cesor", "mix", "pcvar"])
def test_cvar_baselines_deterministic(method):
    env = GuardedGrid(horizon=10)
    a = cq.train(env, method, alpha=0.25, n_episodes=8, iters=3, eval_every=2, seed=1)
    b = cq.train(env, method, alpha=0.25, n_episodes=8, iters=3, eval_every=2, seed=1)
    assert torch.equal(a.x, b.x) and a.extras["evals"] == b.extras["evals"]
    assert torch.allclose(a.x.sum(1), torch.ones(22, dtype=D)) and bool((a.x > 0).all())
    assert not torch.allclose(a.x, torch.full_like(a.x, 0.25))  # it moved


def test_mix_policy_limits():
    from optarium.rl.cvar_quantile import _mix_probs

    g = torch.Generator().manual_seed(2)
    p = torch.randn(22, 9, generator=g, dtype=D)
    p[:, 0] = 50.0
    assert torch.allclose(_mix_probs(p), torch.softmax(p[:, 1:5], 1))
    p[:, 0] = -50.0
    assert torch.allclose(_mix_probs(p), torch.softmax(p[:, 5:9], 1))


def test_new_bad_input():
    env = GuardedGrid(horizon=5)
    with pytest.raises(ValueError, match="quantile_advantage"):
        cq.train(env, quantile_advantage="global", iters=1)
    with pytest.raises(ValueError, match="budget_tol"):
        cq.train(env, budget_tol=-1.0, iters=1)
    with pytest.raises(ValueError, match="ce_w_clip"):
        cq.train(env, "cesor", ce_w_clip=0.5, iters=1)
    with pytest.raises(ValueError, match="gamma"):
        cq.train(env, "pcvar", gamma=0.0, iters=1)
    with pytest.raises(ValueError, match="tol"):
        cq.quantile_cdf(torch.zeros(1, 3), torch.zeros(1, 1), tol=-0.1)
    with pytest.raises(ValueError, match="c:"):
        cq.quantile_cdf(torch.zeros(2, 3), torch.zeros(1, 1))
