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
