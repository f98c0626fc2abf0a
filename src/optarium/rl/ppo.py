r"""PPO's clipped surrogate (Schulman et al., 2017, arXiv:1707.06347): the reference loss of the RL contract.

With the ratio :math:`r = \exp(\log\pi_\theta - \log\pi_{old})` and advantage :math:`\hat A`, per token

.. math::

    \ell = -\min\big(r \hat A,\ \mathrm{clip}(r, 1 - \epsilon, 1 + \epsilon)\,\hat A\big),

averaged over the valid tokens (:func:`optarium.rl.losses.aggregate`). Diagnostics: ``clip_fraction``
(share of valid tokens with :math:`|r - 1| > \epsilon`), ``approx_kl`` (the estimator
:math:`\mathbb E[(r - 1) - \log r]` of :math:`\mathrm{KL}(\pi_{old}\|\pi_\theta)`), ``ratio_mean``,
``zero_grad_frac`` (share of valid tokens whose gradient is exactly zero: clipped in the improving
direction, or :math:`\hat A = 0`; one minus the utilisation). GIPO, segment-level PPO and the CVaR policy
gradients share the signature (:mod:`optarium.rl.losses`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from optarium._core.validation import check_positive
from optarium.rl.losses import aggregate, check_batch

__all__ = ["ppo_clip_loss"]


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    clip_eps: float = 0.2,
    aggregation: str = "token-mean",
) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
    """PPO's clipped surrogate loss (to minimise) and its diagnostics (see the module docstring).

    Args:
        logp, old_logp, advantages, mask: the batch (:mod:`optarium.rl.losses`).
        clip_eps: :math:`\\epsilon > 0`.
        aggregation: one of :data:`optarium.rl.losses.AGGREGATIONS`.

    >>> lp = torch.log(torch.tensor([0.5, 0.3]))
    >>> loss, diag = ppo_clip_loss(lp, lp, torch.tensor([1.0, -1.0]))
    >>> float(loss), float(diag["clip_fraction"])
    (0.0, 0.0)
    """
    logp, old_logp, adv, m = check_batch(logp, old_logp, advantages, mask)
    clip_eps = check_positive("clip_eps", clip_eps)
    log_ratio = torch.where(m > 0, logp - old_logp, torch.zeros_like(logp))
    ratio = log_ratio.exp()
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv
    loss = aggregate(-torch.minimum(unclipped, clipped), m, aggregation)
    with torch.no_grad():
        n = m.sum().clamp_min(1.0)
        diagnostics = {
            "clip_fraction": (((ratio - 1.0).abs() > clip_eps).to(m) * m).sum() / n,
            "approx_kl": (((ratio - 1.0) - log_ratio) * m).sum() / n,
            "ratio_mean": (ratio * m).sum() / n,
            # the gradient is exactly zero where the clipped branch is active (r beyond the clip range in
            # the improving direction) or the advantage is 0: one minus the utilisation
            "zero_grad_frac": ((((unclipped > clipped) | (adv == 0)).to(m)) * m).sum() / n,
        }
    return loss, diagnostics
