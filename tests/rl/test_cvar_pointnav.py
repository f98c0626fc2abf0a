"""Tests of optarium.rl.cvar_pointnav (RiskyPointNav, MLP policy and quantile critic of cvar-quantile-pg)."""

from __future__ import annotations

import pytest
import torch

from optarium._core.seeding import derive_seed
from optarium.rl import cvar_quantile as cq
from optarium.rl.cvar_pointnav import PointNavCritic, PointNavPolicy, RiskyPointNav, train_pointnav

D = torch.float64


class _Steer(torch.nn.Module):
    """Scripted steering: straight to the goal, or up to ``height`` first and east until ``x_turn``."""

    def __init__(self, height: float | None = None, x_turn: float = 0.85) -> None:
        super().__init__()
        self.height, self.x_turn = height, x_turn
        self.w = torch.nn.Parameter(torch.zeros(1, dtype=D))

    def forward(self, o: torch.Tensor) -> torch.Tensor:
        goal = torch.tensor([1.0, 0.0], dtype=o.dtype).expand(o.shape[0], 2)
        tgt = goal
        if self.height is not None:
            up = torch.stack([o[:, 0] + 0.15, torch.full_like(o[:, 0], self.height)], 1)
            tgt = torch.where((o[:, 0] < self.x_turn)[:, None], up, goal)
        d = tgt - o[:, :2]
        k = torch.round(torch.atan2(d[:, 1], d[:, 0]) / (torch.pi / 4)).long() % 8
        logits = torch.full((o.shape[0], 8), -1e9, dtype=o.dtype)
        logits[torch.arange(o.shape[0]), k] = 0.0
        return logits


def test_straight_route_is_risk_neutral_optimum_and_detour_cvar_optimum():
    env = RiskyPointNav()
    g = torch.Generator().manual_seed(0)
    straight = env.rollout(_Steer(), 8000, g)
    detour = env.rollout(_Steer(0.5), 8000, g)
    rs, rd = straight["returns"], detour["returns"]
    assert float(rs.mean()) > float(rd.mean()) + 2.0
    assert float(cq.empirical_cvar(rd, 0.1)) > float(cq.empirical_cvar(rs, 0.1)) + 5.0
    assert float(straight["safe"].to(D).mean()) == 0.0 and float(detour["safe"].to(D).mean()) > 0.99
    # padding: rewards vanish after the episode ends, one done per episode
    assert bool((straight["rewards"][~straight["mask"]] == 0).all())
    assert straight["dones"].sum(1).tolist() == [1] * 8000


def test_per_transition_levels_in_quantile_td_loss():
    g = torch.Generator().manual_seed(1)
    v, vn = torch.randn(5, 3, generator=g, dtype=D), torch.randn(5, 4, generator=g, dtype=D)
    r, d = torch.randn(5, generator=g, dtype=D), torch.tensor([0, 1, 0, 0, 1], dtype=torch.bool)
    lv = torch.tensor([0.1, 0.5, 0.9], dtype=D)
    shared = cq.quantile_td_loss(v, vn, r, d, lv, 0.9, 0.0)
    assert torch.allclose(cq.quantile_td_loss(v, vn, r, d, lv.expand(5, 3), 0.9, 0.0), shared)
    with pytest.raises(ValueError, match="v_pred"):
        cq.quantile_td_loss(v, vn, r, d, torch.zeros(4, 3, dtype=D), 0.9, 0.0)


def test_mlp_critic_learns_a_quantile_function():
    torch.manual_seed(0)
    critic = PointNavCritic(hidden=16, n_cos=8).to(D)
    opt = torch.optim.Adam(critic.parameters(), lr=2e-2)
    g = torch.Generator().manual_seed(2)
    b = 128
    obs, zero, done = torch.zeros(b, 3, dtype=D), torch.zeros(b, 1, dtype=D), torch.ones(b, dtype=torch.bool)
    for _ in range(150):
        r = torch.rand(b, generator=g, dtype=D)  # one step, return ~ U(0, 1): v(s, u) = u
        u = torch.rand(b, 8, generator=g, dtype=D)
        loss = cq.quantile_td_loss(critic(obs, u), zero, r, done, u, 1.0, 0.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    grid = torch.linspace(0.05, 0.95, 19, dtype=D)[None]
    with torch.no_grad():
        v = critic(obs[:1], grid)[0]
    assert float((v - grid[0]).abs().mean()) < 0.05


def _manual_cvar_pg(env: RiskyPointNav, iters: int, n: int, alpha: float, seed: int) -> torch.Tensor:
    torch.manual_seed(derive_seed(seed, "init"))
    policy = PointNavPolicy(64).to(D)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(derive_seed(seed, "rollout"))
    for _ in range(iters):
        ro = env.rollout(policy, n, g)
        logp = torch.log_softmax(policy(ro["obs"].reshape(-1, 3)), 1).reshape(n, env.horizon, 8)
        logp = logp.gather(2, ro["actions"][..., None]).squeeze(-1) * ro["mask"]
        loss = cq.cvar_pg_surrogate(logp.sum(1), ro["returns"], alpha)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.nn.utils.parameters_to_vector(policy.parameters()).detach()


def test_train_pointnav_limits_and_determinism():
    env = RiskyPointNav(horizon=8)
    kw = dict(alpha=0.25, n_episodes=16, iters=3, eval_every=2, n_eval=64, seed=4)
    cvar_pg = train_pointnav(env, "cvar-qpg", lam=0.0, **kw)
    assert torch.allclose(cvar_pg.x, _manual_cvar_pg(env, 3, 16, 0.25, 4), atol=1e-12)
    a = train_pointnav(env, "cvar-qpg", lam=1.0, **kw)
    b = train_pointnav(env, "cvar-qpg", lam=1.0, **kw)
    assert torch.equal(a.x, b.x) and a.extras["evals"] == b.extras["evals"]
    assert not torch.equal(a.x, cvar_pg.x)
    assert len(a.extras["evals"]) == 3 and all(h > 0 for h in a.history.metrics["loss_q"])
    rf = train_pointnav(env, "reinforce", **kw)
    assert rf.n_iter == 3 and not torch.equal(rf.x, cvar_pg.x)


def test_pointnav_bad_input():
    with pytest.raises(ValueError, match=r"^p:"):
        RiskyPointNav(p=2.0)
    with pytest.raises(ValueError, match=r"^step:"):
        RiskyPointNav(step=0.0)
    env = RiskyPointNav(horizon=4)
    with pytest.raises(ValueError, match="method"):
        train_pointnav(env, "cesor", iters=1)
    with pytest.raises(ValueError, match="alpha"):
        train_pointnav(env, alpha=0.01, n_episodes=16, iters=1)
    with pytest.raises(ValueError, match="lam"):
        train_pointnav(env, lam=-1.0, iters=1)
