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
