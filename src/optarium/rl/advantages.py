r"""Advantage estimators shared by the RL family: GAE and GRPO's group-normalised advantages.

- :func:`gae`: generalised advantage estimation (Schulman et al. 2016, arXiv:1506.02438),
  :math:`\hat A_t = \sum_k (\gamma\lambda)^k \delta_{t+k}`,
  :math:`\delta_t = r_t + \gamma (1-d_t) V_{t+1} - V_t`,
  over a ``(T, ...)`` rollout with episode ends ``dones`` (the recursion is reset at a done), vectorised over
  the trailing (environment) dimensions; returns ``(advantages, returns = advantages + values)``.
- :func:`group_normalized_advantages`: GRPO (Shao et al. 2024, arXiv:2402.03300) as ``trl``'s
  ``GRPOTrainer`` defines it: rewards in consecutive groups of ``group_size`` completions of one prompt,
  :math:`\hat A_i = (R_i - \bar R_g) / (\mathrm{std}_g + 10^{-4})` with the unbiased (Bessel) group standard
  deviation, or only centred with ``scale=False``.
"""

from __future__ import annotations

import torch

from optarium._core.validation import check_in_range, check_int, check_nonnegative

__all__ = ["gae", "group_normalized_advantages"]


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_value: torch.Tensor,
    *,
    gamma: float = 0.99,
    lam: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over a rollout of ``T`` steps (leading dimension).

    Args:
        rewards, values, dones: ``(T, ...)`` tensors; ``dones[t]`` is 1 if the episode ended at step ``t``
            (then no bootstrap from ``t + 1``).
        last_value: ``values``' shape without the leading dimension: :math:`V(s_T)` to bootstrap from.
        gamma, lam: discount and GAE parameter in [0, 1].
    """
    for name, t in (("rewards", rewards), ("values", values), ("dones", dones), ("last_value", last_value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: must be a tensor, got {type(t).__name__}")
    if rewards.ndim == 0:
        raise ValueError("rewards: must have a time dimension")
    if values.shape != rewards.shape:
        raise ValueError(
            f"values: must have rewards' shape {tuple(rewards.shape)}, got {tuple(values.shape)}"
        )
    if dones.shape != rewards.shape:
        raise ValueError(f"dones: must have rewards' shape {tuple(rewards.shape)}, got {tuple(dones.shape)}")
    if last_value.shape != rewards.shape[1:]:
        raise ValueError(
            f"last_value: must have shape {tuple(rewards.shape[1:])}, got {tuple(last_value.shape)}"
        )
    gamma = check_in_range("gamma", gamma, 0.0, 1.0)
    lam = check_in_range("lam", lam, 0.0, 1.0)
    notdone = 1.0 - dones.to(rewards)
    next_v = torch.cat([values[1:], last_value.unsqueeze(0).to(values)], 0)
    delta = rewards + gamma * notdone * next_v - values
    adv = torch.empty_like(delta)
    acc = torch.zeros_like(delta[0])
    for t in range(delta.shape[0] - 1, -1, -1):  # the recursion over time is inherently sequential
        acc = delta[t] + gamma * lam * notdone[t] * acc
        adv[t] = acc
    return adv, adv + values


def group_normalized_advantages(
    rewards: torch.Tensor, group_size: int, *, scale: bool = True, eps: float = 1e-4
) -> torch.Tensor:
    """GRPO's advantages of a flat ``(G * group_size,)`` reward vector (groups consecutive, as in ``trl``)."""
    if not isinstance(rewards, torch.Tensor):
        raise TypeError(f"rewards: must be a tensor, got {type(rewards).__name__}")
    group_size = check_int("group_size", group_size, minimum=1)
    eps = check_nonnegative("eps", eps)
    if rewards.ndim != 1 or rewards.numel() % group_size:
        raise ValueError(
            f"rewards: must be 1-d with a length divisible by group_size={group_size}, "
            f"got {tuple(rewards.shape)}"
        )
    g = rewards.view(-1, group_size)
    adv = g - g.mean(1, keepdim=True)
    if scale:
        adv = adv / (g.std(1, keepdim=True) + eps)
    return adv.reshape(-1)
