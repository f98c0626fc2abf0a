"""The replay-buffer training loop: mechanics on the GridWorld (finite, logged, deterministic, validated)."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("gymnasium", reason="gymnasium (rl extra) not installed")

from optarium.rl import ppo_clip_loss
from optarium.rl.envs import GridWorld2x2Env
from optarium.rl.gipo import gipo_loss
from optarium.rl.replay import train_replay_pg


class _OneHot(torch.nn.Module):
    def __init__(self, out: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.nn.functional.one_hot(x.reshape(-1).long(), 4).float())


def _run(loss, seed: int = 0):
    torch.manual_seed(seed)
    return train_replay_pg(
        lambda: GridWorld2x2Env(max_steps=10),
        _OneHot(4),
        _OneHot(1),
        loss,
        buffer_size=120,
        rollout_steps=40,
        sample_rounds=3,
        minibatch=32,
        reuse=2,
        actor_every=2,
        iters=6,
        seed=seed,
    )


def test_mechanics_finite_logged_and_deterministic() -> None:
    r = _run(gipo_loss)
    h = r.history.metrics
    assert r.history.steps == tuple(40 * (i + 1) for i in range(6))
    assert all(math.isfinite(v) for v in h["loss"]) and all(v == 0.0 for v in h["zero_grad_frac"])
    assert all(v >= 0 for v in h["mean_abs_log_ratio"]) and max(h["mean_abs_log_ratio"]) > 0  # stale data
    assert r.history == _run(gipo_loss).history
    p = _run(ppo_clip_loss)
    assert all(0.0 <= v <= 1.0 for v in p.history.metrics["zero_grad_frac"])
    with pytest.raises(ValueError, match=r"^buffer_size"):
        train_replay_pg(lambda: GridWorld2x2Env(), _OneHot(4), _OneHot(1), gipo_loss, buffer_size=0)
    with pytest.raises(TypeError, match=r"^loss"):
        train_replay_pg(lambda: GridWorld2x2Env(), _OneHot(4), _OneHot(1), "gipo")


class _FixedEpisodes:
    """A gymnasium-style VectorEnv of ``num_envs`` chains: every episode lasts ``length`` steps with reward 1
    per step, observation = the step count within the episode. NEXT_STEP autoreset as gymnasium 1.x does it:
    the step after an episode end only resets that env, and here (unlike gymnasium's envs, which give 0) it
    pays a reward of 100, so counting it as a transition would show in the returns."""

    def __init__(self, num_envs: int, length: int, mode: str = "NextStep") -> None:
        import numpy as np

        self.np = np
        self.num_envs, self.length = num_envs, length
        self.metadata = {"autoreset_mode": mode}
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.prev_done = np.zeros(num_envs, dtype=bool)

    def reset(self, seed=None):
        self.t[:] = 0
        self.prev_done[:] = False
        return self.t.astype("float32")[:, None], {}

    def step(self, actions):
        np = self.np
        assert actions.shape == (self.num_envs,)
        rew = np.ones(self.num_envs)
        self.t += 1
        term = self.t >= self.length
        if self.metadata["autoreset_mode"] == "SameStep":  # reset inside the final step: no reset step
            self.t[term] = 0
            return self.t.astype("float32")[:, None], rew, term, np.zeros(self.num_envs, bool), {}
        rew[self.prev_done] = 100.0
        self.t[self.prev_done] = 0
        term[self.prev_done] = False
        self.prev_done = term.copy()
        return self.t.astype("float32")[:, None], rew, term, np.zeros(self.num_envs, bool), {}


class _Lin(torch.nn.Module):
    def __init__(self, out: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(1, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def _run_vec(env_fn, rollout_steps: int = 24, iters: int = 3, seed: int = 0, loss=gipo_loss):
    torch.manual_seed(0)
    return train_replay_pg(
        env_fn, _Lin(2), _Lin(1), loss, buffer_size=64, rollout_steps=rollout_steps, sample_rounds=2,
        minibatch=16, reuse=2, actor_every=2, iters=iters, seed=seed,
    )  # fmt: skip


def test_vector_env_next_step_autoreset_drops_the_reset_transitions() -> None:
    # 3 envs x 8 vector steps per iteration, episodes of 3 steps: per env the steps run e,e,E,r,e,e,E,r,...
    # (r = the reset step): 2 episodes per env in the first 8 steps, every return exactly 3
    r = _run_vec(lambda: _FixedEpisodes(3, 3), rollout_steps=24, iters=3)
    eps = r.extras["episode_returns"]
    assert r.extras["env_steps"] == 72 and r.history.steps == (24, 48, 72)
    assert len(eps) == 3 * (72 // 3 // 4) and set(eps) == {3.0}  # 24 steps per env = 6 episodes + resets
    assert r.value == 3.0
    h = r.history.metrics
    assert h["episodes"] == (6.0, 12.0, 18.0) and h["return_last20"][-1] == 3.0
    # SAME_STEP autoreset: no reset transitions, every step is a transition
    same = _run_vec(lambda: _FixedEpisodes(3, 3, mode="SameStep"), rollout_steps=24, iters=3)
    assert same.extras["episode_returns"] == (3.0,) * 24  # 24 steps per env = 8 episodes each


def test_single_env_and_validation() -> None:
    from gymnasium.vector import AutoresetMode

    r = _run_vec(lambda: GridWorld2x2Env(max_steps=5), rollout_steps=20, iters=2)  # a plain Env: batch of 1
    assert all(v in (0.0, 1.0) for v in r.extras["episode_returns"]) and r.extras["env_steps"] == 40
    with pytest.raises(ValueError, match=r"^rollout_steps"):
        _run_vec(lambda: _FixedEpisodes(3, 3), rollout_steps=25)
    with pytest.raises(ValueError, match=r"^env_fn"):
        _run_vec(lambda: _FixedEpisodes(3, 3, mode=AutoresetMode.DISABLED))


def test_last_k_mean() -> None:
    from optarium.rl.replay import last_k_mean

    assert last_k_mean([1.0, 2.0, 3.0, 4.0], k=3) == 3.0
    assert last_k_mean([5.0], k=20) == 5.0 and math.isnan(last_k_mean([], k=20))
    with pytest.raises(ValueError, match=r"^k"):
        last_k_mean([1.0], k=0)


def test_cartpole_vector_env_deterministic_and_ppo_utilisation() -> None:
    import gymnasium as gym

    def env_fn():
        return gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="vector_entry_point")

    def run(seed: int, loss=gipo_loss):
        torch.manual_seed(1)
        pol = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
        val = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        return train_replay_pg(
            env_fn, pol, val, loss, buffer_size=400, rollout_steps=100, sample_rounds=4, minibatch=64,
            reuse=2, actor_every=2, iters=4, seed=seed, reward_scale=0.01, lr=3e-3,
        )  # fmt: skip

    a, b, c = run(0), run(0), run(1)
    assert a.history == b.history and a.extras == b.extras
    assert a.extras["episode_returns"] != c.extras["episode_returns"]
    # every CartPole episode pays 1 per step and a random-ish policy falls within ~8-100 steps
    assert all(v >= 8.0 and v == int(v) for v in a.extras["episode_returns"])
    assert all(v == 0.0 for v in a.history.metrics["zero_grad_frac"])  # GIPO: always a gradient
    p = run(0, loss=ppo_clip_loss).history.metrics["zero_grad_frac"]
    assert all(0.0 <= v < 1.0 for v in p) and max(p) > 0.0  # off-policy data: some PPO samples are clipped
