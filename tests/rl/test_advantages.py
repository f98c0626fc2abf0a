"""GAE against its definition, GRPO's group-normalised advantages against trl's definition."""

from __future__ import annotations

import os

import pytest
import torch

from optarium.rl.advantages import gae, group_normalized_advantages

D = torch.float64


def test_gae_matches_the_discounted_sum_of_td_errors() -> None:
    g = torch.Generator().manual_seed(0)
    T, E = 9, 3
    r, v = torch.randn(T, E, generator=g, dtype=D), torch.randn(T, E, generator=g, dtype=D)
    dones = (torch.rand(T, E, generator=g) < 0.25).to(D)
    last = torch.randn(E, generator=g, dtype=D)
    adv, ret = gae(r, v, dones, last, gamma=0.9, lam=0.8)
    vn = torch.cat([v[1:], last[None]])
    delta = r + 0.9 * (1 - dones) * vn - v
    for e in range(E):
        for t in range(T):
            acc, k, coef = 0.0, t, 1.0
            while k < T:
                acc += coef * float(delta[k, e])
                if dones[k, e]:
                    break
                coef *= 0.9 * 0.8
                k += 1
            assert float(adv[t, e]) == pytest.approx(acc, rel=1e-12, abs=1e-12)
    assert torch.allclose(ret, adv + v)
    # lambda = 1, no dones, V = 0: discounted return-to-go
    adv1, _ = gae(
        torch.ones(4, dtype=D),
        torch.zeros(4, dtype=D),
        torch.zeros(4),
        torch.zeros((), dtype=D),
        gamma=0.5,
        lam=1.0,
    )
    assert adv1.tolist() == pytest.approx([1.875, 1.75, 1.5, 1.0])


def test_gae_bad_input() -> None:
    z = torch.zeros(3)
    with pytest.raises(ValueError, match=r"^values"):
        gae(z, torch.zeros(4), z, torch.zeros(()))
    with pytest.raises(ValueError, match=r"^last_value"):
        gae(z, z, z, torch.zeros(2))
    with pytest.raises(ValueError, match=r"^gamma"):
        gae(z, z, z, torch.zeros(()), gamma=1.5)


def test_group_advantages_equal_trl_definition() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    trl_utils = pytest.importorskip("trl.trainer.utils", reason="trl (rl extra) not installed")
    g = torch.Generator().manual_seed(1)
    rewards = torch.randn(5 * 4, generator=g)
    rewards[8:12] = 0.7  # a group with zero spread
    adv = group_normalized_advantages(rewards, 4)
    # trl 1.16 GRPOTrainer (scale_rewards="group"): rewards - group mean, divided by (group std + 1e-4)
    grouped = rewards.view(-1, 4)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(4)
    std = trl_utils.nanstd(grouped, dim=1).repeat_interleave(4)
    ref = (rewards - mean) / (std + 1e-4)
    assert torch.allclose(adv, ref, rtol=1e-6, atol=1e-7)
    assert torch.equal(adv[8:12], torch.zeros(4))
    assert torch.allclose(group_normalized_advantages(rewards, 4, scale=False), rewards - mean)
    with pytest.raises(ValueError, match=r"^rewards"):
        group_normalized_advantages(rewards, 3)
