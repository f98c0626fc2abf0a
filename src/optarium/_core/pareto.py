"""Pareto dominance: the one non-dominated filter every multi-objective piece of optarium uses.

Row ``j`` dominates row ``i`` when it is at least as small in every objective and strictly smaller in one
(minimisation; negate to maximise). Exact duplicates do not dominate each other, so all copies of a
non-dominated point are kept.
"""

from __future__ import annotations

import math

import torch

__all__ = ["non_dominated"]

#: Pairwise comparisons per block in the general (m > 2) test: bounds its memory.
_BLOCK = 1 << 22


def non_dominated(F: torch.Tensor) -> torch.Tensor:
    """Boolean mask ``(..., N)`` of the points of ``F`` ``(..., N, M)`` that no other point dominates.

    Batched over the leading dimensions. ``M = 1``: the minimisers. ``M = 2``: one lexicographic sort and a
    running minimum (O(N log N)). ``M > 2``: pairwise comparison in blocks of rows and batch elements
    (O(N^2 M) time, O(block) memory).
    """
    if F.ndim < 2:
        raise ValueError(f"F: must have shape (..., N, M), got {tuple(F.shape)}")
    n, m = F.shape[-2], F.shape[-1]
    if n == 0:
        return torch.zeros(F.shape[:-1], dtype=torch.bool, device=F.device)
    if m == 1:
        return F[..., 0] == F[..., 0].amin(-1, keepdim=True)
    if m == 2:
        return _two_objectives(F)
    flat = F.reshape(-1, n, m)
    keep = torch.empty(flat.shape[:-1], dtype=torch.bool, device=F.device)
    rows = max(1, _BLOCK // (n * m))
    batch = max(1, _BLOCK // (rows * n * m))
    for b in range(0, flat.shape[0], batch):
        fb = flat[b : b + batch]
        for r in range(0, n, rows):
            zi = fb[:, r : r + rows].unsqueeze(-2)  # (B, r, 1, m): the points tested
            zj = fb.unsqueeze(-3)  # (B, 1, n, m): every other point
            dominated = ((zj <= zi).all(-1) & (zj < zi).any(-1)).any(-1)
            keep[b : b + batch, r : r + rows] = ~dominated
    return keep.reshape(F.shape[:-1])


def _two_objectives(F: torch.Tensor) -> torch.Tensor:
    f1, f2 = F[..., 0], F[..., 1]
    p = torch.argsort(f2, dim=-1, stable=True)
    q = torch.argsort(f1.gather(-1, p), dim=-1, stable=True)
    perm = p.gather(-1, q)  # lexicographic order by (f1, f2)
    g1, g2 = f1.gather(-1, perm), f2.gather(-1, perm)
    inf = torch.full_like(g2[..., :1], math.inf)
    excl_min = torch.cat([inf, g2[..., :-1]], dim=-1).cummin(dim=-1).values  # min f2 over earlier points
    new = torch.ones_like(g2, dtype=torch.bool)
    new[..., 1:] = (g1[..., 1:] != g1[..., :-1]) | (g2[..., 1:] != g2[..., :-1])
    pos = torch.arange(g2.shape[-1], device=F.device).expand_as(g2)
    start = torch.where(new, pos, torch.zeros_like(pos)).cummax(dim=-1).values  # first of each duplicate run
    # a point is dominated iff a point before its duplicate run (f1 no larger) has f2 no larger
    nd_sorted = ~(excl_min.gather(-1, start) <= g2)
    out = torch.empty_like(nd_sorted)
    out.scatter_(-1, perm, nd_sorted)
    return out
