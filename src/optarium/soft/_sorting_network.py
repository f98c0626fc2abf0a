"""Soft bitonic sorting network (values and, optionally, the soft permutation matrix).

Reference: F. Petersen, C. Borgelt, H. Kuehne, O. Deussen, "Differentiable Sorting Networks for Scalable
Sorting and Ranking Supervision", ICML 2021 (arXiv:2105.04019); used as the ``sorting_network`` method of
A. Paulus et al., "SoftJAX & SoftTorch", ICML 2026 (arXiv:2603.08824).

The last axis (length n) is padded to N = 2^ceil(log2 n) (N >= 2) and run through Batcher's bitonic network:
for phase p = 0..log2(N)-1 and sub-step s = 0..p, position i is compared with its partner j = i XOR 2^(p-s);
inside blocks of size 2^(p+1) whose index bit p+1 is 0 the pair is put in ascending order, otherwise in
descending order. Every hard compare-and-swap (a, b) -> (min, max) is replaced by

    sigma = sigmoidal(a - b, softness, mode),  min = sigma b + (1 - sigma) a,  max = sigma a + (1 - sigma) b,

and the soft permutation P (rows = output positions, columns = inputs; P = I at the start) is carried
along by applying the same convex mixing to the rows of P. Padding uses 1.0 when the inputs were
standardized into (0, 1) (as SoftTorch does) and otherwise the row maximum + 1 (SoftTorch uses the maximum
over the whole batch, which couples independent rows; deliberate deviation). After the network the padded
positions (last N - n) are dropped; the permutation is restricted to the first n rows and columns and its
rows renormalised. Cost: O(N log^2 N) for values, O(N^2 log^2 N) when P is tracked. Batched over leading
dimensions with no Python loop over the batch (the loop runs over the log^2 N network stages only).
"""

from __future__ import annotations

import torch

from optarium.soft._common import _unchecked
from optarium.soft.elementwise import sigmoidal

__all__ = ["bitonic_stages", "sorting_network"]


def bitonic_stages(
    n_padded: int, device: torch.device | None = None
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Stages of the ascending bitonic network on ``n_padded`` (a power of two) wires.

    Returns a list of ``(partner, gets_min)``: the partner index of every wire and whether the wire
    receives the minimum of its pair.
    """
    if n_padded < 1 or n_padded & (n_padded - 1):
        raise ValueError(f"n_padded: must be a power of two, got {n_padded}")
    idx = torch.arange(n_padded, device=device)
    stages = []
    for phase in range(n_padded.bit_length() - 1):
        ascending = (idx & (1 << (phase + 1))) == 0
        for sub in range(phase + 1):
            partner = idx ^ (1 << (phase - sub))
            lower = idx < partner
            stages.append((partner, (ascending & lower) | (~ascending & ~lower)))
    return stages


def sorting_network(
    x: torch.Tensor,
    softness: float | torch.Tensor,
    mode: str,
    descending: bool = False,
    standardized: bool = False,
    return_perm: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Soft-sort the last axis of ``x`` (..., n) with a bitonic network.

    Returns ``(values, P)``: soft sorted values (..., n) and, if ``return_perm``, the soft permutation
    (..., n, [n]) whose row i is a distribution over the inputs for sorted position i (else ``None``).
    """
    n = x.shape[-1]
    n_padded = max(2, 1 << (n - 1).bit_length())
    if n_padded > n:
        if standardized:
            pad = torch.ones(*x.shape[:-1], n_padded - n, dtype=x.dtype, device=x.device)
        else:
            top = x.detach().amax(dim=-1, keepdim=True) + 1.0
            pad = top.expand(*x.shape[:-1], n_padded - n)
        x = torch.cat([x, pad], dim=-1)
    perm = None
    if return_perm:
        eye = torch.eye(n_padded, dtype=x.dtype, device=x.device)
        perm = eye.expand(*x.shape[:-1], n_padded, n_padded)
    for partner, gets_min in bitonic_stages(n_padded, x.device):
        xp = x[..., partner]
        with _unchecked():
            sig = sigmoidal(x - xp, softness, mode)
        lo = sig * xp + (1.0 - sig) * x
        hi = sig * x + (1.0 - sig) * xp
        x = torch.where(gets_min, lo, hi)
        if perm is not None:
            mix = torch.where(gets_min, sig, 1.0 - sig).unsqueeze(-1)
            perm = (1.0 - mix) * perm + mix * perm[..., partner, :]
    values = x[..., :n]
    if descending:
        values = values.flip(-1)
    if perm is not None:
        if n_padded > n:
            perm = perm[..., :n, :n]
            perm = perm / perm.sum(dim=-1, keepdim=True).clamp(min=1e-10)
        if descending:
            perm = perm.flip(-2)
    return values, perm
