r"""Batch selection from a candidate set: UCB and Pareto (non-dominated sort over mean and std).

Paper: M. Bafna, S. A. Jadhav, D. Sweet, "Taking the GP Out of the Loop", ICML 2026, arXiv:2506.12818.

- UCB (the paper's main acquisition): score :math:`\mu(x) + \beta\sigma(x)` with :math:`\beta = 1`; the ``q``
  highest scores win, ties broken at random (candidates are shuffled first).
- Pareto (the noise-free variant without fitting): :math:`(\mu, \sigma)` are two objectives to maximise;
  successive non-dominated fronts are peeled off and added whole while they fit; from the first front
  that does not fit, the remaining slots are drawn uniformly without replacement; the batch is returned
  sorted by decreasing :math:`\mu`.

Everything here is written for maximisation of the scores passed in (negate a minimisation mean first).
:func:`non_dominated_mask` is shared by the multi-objective code (minimisation by default, like
:meth:`~optarium._core.asktell.AskTellStrategy.standardized_Y`).
"""

from __future__ import annotations

import torch

from optarium._core.pareto import non_dominated
from optarium._core.validation import check_finite, check_int, check_type

__all__ = ["non_dominated_mask", "non_dominated_ranks", "pareto_select", "ucb_select"]


def _check_scores(name: str, Y: torch.Tensor) -> torch.Tensor:
    check_type(name, Y, torch.Tensor)
    if Y.ndim != 2:
        raise ValueError(f"{name}: must have shape (n, m), got {tuple(Y.shape)}")
    if Y.is_floating_point() and torch.isnan(Y).any():
        raise ValueError(f"{name}: contains NaN")
    return Y


def non_dominated_mask(Y: torch.Tensor, *, maximize: bool = False) -> torch.Tensor:
    """Boolean mask ``(n,)`` of the rows of ``Y`` (shape ``(n, m)``) that no other row dominates.

    Row ``j`` dominates row ``i`` if it is at least as good in every column and strictly better in one
    (``maximize=False``: smaller is better). Duplicated rows do not dominate each other. The test is
    :func:`optarium._core.pareto.non_dominated`.
    """
    Y = _check_scores("Y", Y)
    return non_dominated(-Y if maximize else Y)


def non_dominated_ranks(
    Y: torch.Tensor, *, maximize: bool = False, max_fronts: int | None = None
) -> torch.Tensor:
    """Front index of every row (0 = non-dominated) by successive peeling; rows beyond ``max_fronts`` fronts
    get ``max_fronts``."""
    Y = _check_scores("Y", Y)
    ranks = torch.full((Y.shape[0],), -1, dtype=torch.long, device=Y.device)
    remaining = torch.arange(Y.shape[0], device=Y.device)
    front = 0
    while remaining.numel() and (max_fronts is None or front < max_fronts):
        mask = non_dominated_mask(Y[remaining], maximize=maximize)
        ranks[remaining[mask]] = front
        remaining = remaining[~mask]
        front += 1
    ranks[remaining] = front
    return ranks


def ucb_select(
    mean: torch.Tensor,
    std: torch.Tensor,
    q: int,
    *,
    beta: float = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Indices of the ``q`` candidates with the largest :math:`\\mu + \\beta\\sigma` (random tie-break)."""
    check_type("mean", mean, torch.Tensor)
    check_type("std", std, torch.Tensor)
    if mean.ndim != 1 or std.shape != mean.shape:
        raise ValueError(f"std: must have the shape of mean {tuple(mean.shape)}, got {tuple(std.shape)}")
    q = check_int("q", q, minimum=1)
    beta = check_finite("beta", beta)
    n = mean.shape[0]
    perm = torch.randperm(n, generator=generator).to(mean.device)
    score = (mean + beta * std)[perm]
    top = torch.topk(score, min(q, n)).indices
    return perm[top]


def pareto_select(
    mean: torch.Tensor, std: torch.Tensor, q: int, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Indices of ``min(q, n)`` candidates chosen by non-dominated sort over ``(mean, std)`` (both maximised):
    whole fronts while they fit, then a uniform draw from the first front that does not; sorted by decreasing
    ``mean``."""
    check_type("mean", mean, torch.Tensor)
    check_type("std", std, torch.Tensor)
    if mean.ndim != 1 or std.shape != mean.shape:
        raise ValueError(f"std: must have the shape of mean {tuple(mean.shape)}, got {tuple(std.shape)}")
    q = check_int("q", q, minimum=1)
    Y = torch.stack([mean, std], -1)
    remaining = torch.arange(mean.shape[0], device=mean.device)
    chosen: list[torch.Tensor] = []
    left = min(q, mean.shape[0])
    while left > 0:
        mask = non_dominated_mask(Y[remaining], maximize=True)
        front = remaining[mask]
        if front.numel() <= left:
            chosen.append(front)
            left -= front.numel()
            remaining = remaining[~mask]
        else:
            pick = torch.randperm(front.numel(), generator=generator)[:left].to(front.device)
            chosen.append(front[pick])
            left = 0
    idx = torch.cat(chosen) if chosen else remaining[:0]
    return idx[torch.argsort(mean[idx], descending=True, stable=True)]
