"""The 2x2 GridWorld's exact evaluation: the policy-gradient theorem, Bellman, the optimum, bad input."""

from __future__ import annotations

import pytest
import torch

from optarium.problems.gridworld import evaluate, score

D = torch.float64


def _theta(seed: int = 0) -> torch.Tensor:
    return torch.randn(4, 4, generator=torch.Generator().manual_seed(seed), dtype=D)


def test_normalised_target_is_grad_J_over_visitation_mass() -> None:
    th = _theta().requires_grad_(True)
    (gJ,) = torch.autograd.grad(evaluate(th).J, th)
    ev = evaluate(th.detach())
    g_star = (ev.d[:, None] * ev.pi * ev.A).reshape(-1) @ score(ev.pi)
    assert torch.allclose(g_star, gJ.reshape(-1) / ev.rho.sum(), rtol=1e-10, atol=1e-15)
    assert float(ev.rho[3]) == 0.0 and float(ev.d.sum()) == pytest.approx(1.0)
    # Bellman: V = sum_a pi Q; the optimal deterministic policy reaches the goal in 2 steps
    assert torch.allclose(ev.V, (ev.pi * ev.Q).sum(-1))
    best = torch.full((4, 4), -30.0, dtype=D)
    best[0, 1] = best[1, 2] = best[2, 1] = 30.0
    assert float(evaluate(best).J) == pytest.approx(0.9, rel=1e-9)
    with pytest.raises(ValueError, match=r"^logits"):
        evaluate(torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"^gamma"):
        evaluate(th.detach(), gamma=1.0)
