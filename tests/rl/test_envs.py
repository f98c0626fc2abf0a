"""The gymnasium GridWorld follows gymnasium's conventions and the exact model; PPO's clipped loss equals
stable-baselines3's on the same tensors."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("gymnasium", reason="gymnasium (rl extra) not installed")

from optarium.problems.gridworld import transitions
from optarium.rl import ppo_clip_loss
from optarium.rl.envs import GridWorld2x2Env


def test_env_checker_and_dynamics_match_the_tabular_model() -> None:
    from gymnasium.utils.env_checker import check_env

    env = GridWorld2x2Env(max_steps=5)
    check_env(env, skip_render_check=True)
    P = transitions()
    for s in range(3):
        for a in range(4):
            env.reset(seed=0)
            env._state = s
            nxt, rew, term, trunc, _ = env.step(a)
            assert P[s, a, nxt] == 1.0
            assert term == (nxt == 3) and rew == (1.0 if nxt == 3 else 0.0) and not trunc
    env.reset()
    for _ in range(5):
        _, _, term, trunc, _ = env.step(0)  # up from the start: a wall
    assert not term and trunc
    with pytest.raises(ValueError, match=r"^max_steps"):
        GridWorld2x2Env(max_steps=0)
    with pytest.raises(ValueError, match=r"^action"):
        env.step(7)


def test_ppo_clip_loss_equals_stable_baselines3() -> None:
    sb3 = pytest.importorskip("stable_baselines3", reason="stable-baselines3 (rl extra) not installed")
    import numpy as np
    from stable_baselines3.common.logger import configure

    model = sb3.PPO(
        "MlpPolicy",
        GridWorld2x2Env(max_steps=20),
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        normalize_advantage=False,
        ent_coef=0.0,
        vf_coef=0.0,
        clip_range=0.2,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [8]},
    )
    model.set_logger(configure(None, []))
    _, callback = model._setup_learn(64, None)
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=64)
    buf = model.rollout_buffer
    rng = np.random.default_rng(0)
    buf.log_probs += (0.4 * rng.standard_normal(buf.log_probs.shape)).astype(np.float32)  # off-policy
    (data,) = list(buf.get(batch_size=None))
    with torch.no_grad():
        _, logp, _ = model.policy.evaluate_actions(data.observations, data.actions.long().flatten())
    loss, diag = ppo_clip_loss(logp, data.old_log_prob, data.advantages, clip_eps=0.2)
    model.train()  # one epoch, one minibatch: SB3's loss at the same parameters and tensors
    logged = model.logger.name_to_value
    assert 0.1 < float(diag["clip_fraction"]) < 0.9  # the comparison exercises both branches
    assert float(loss) == pytest.approx(logged["train/policy_gradient_loss"], rel=1e-6, abs=1e-7)
    assert float(diag["clip_fraction"]) == pytest.approx(logged["train/clip_fraction"], abs=1e-7)
