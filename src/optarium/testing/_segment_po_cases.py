"""Loss-conformance cases of :mod:`optarium.rl.segment_po` (SAPO's segment-ratio clipped surrogate), each
with a reference written independently from the paper's formulas (Eq. 8–9, token-mean over valid entries)."""

from __future__ import annotations

import functools

import torch

__all__ = ["segment_po_cases"]

_SHARED_ADVANTAGE = (
    "the segment ratio couples the tokens of a segment, so the on-policy gradient of a token is minus the "
    "segment-mean advantage over N, not minus its own advantage (the check's random per-token advantages); "
    "with one advantage per segment, as SAPO uses it, the weights are 1/N: checked in "
    "tests/rl/test_segment_po.py"
)


def _stride_ends(logp: torch.Tensor, mask: torch.Tensor | None, stride: int = 3) -> torch.Tensor:
    """Every ``stride``-th position and each row's last valid token end a segment."""
    m = torch.ones_like(logp) if mask is None else mask
    valid = m > 0
    pos = torch.arange(logp.shape[-1], device=logp.device).expand_as(logp)
    last = torch.where(valid, pos, torch.full_like(pos, -1)).amax(-1, keepdim=True)
    return valid & (((pos + 1) % stride == 0) | (pos == last))


def _strided_loss(logp, old, adv, mask=None, **kw):
    from optarium.rl.segment_po import segment_policy_loss

    ok = (
        isinstance(logp, torch.Tensor)
        and logp.ndim == 2
        and (mask is None or (isinstance(mask, torch.Tensor) and mask.shape == logp.shape))
    )  # else leave the validation (and its error naming the argument) to the loss
    ends = _stride_ends(logp, mask) if ok else None
    return segment_policy_loss(logp, old, adv, mask, ends=ends, **kw)


def _ref(logp, old, adv, mask, eps=0.2, c=3.0, stride=1):
    """Eq. 8–9 with an explicit loop over segments (stride 1: every token its own segment)."""
    m = torch.ones_like(logp) if mask is None else mask.to(logp)
    a = adv.detach().expand_as(logp)
    total = logp.new_zeros(())
    ends = _stride_ends(logp, mask, stride) if logp.ndim == 2 else None
    if logp.ndim == 1:
        for i in range(logp.shape[0]):
            r = torch.exp((logp[i] - old[i]).clamp(-20, 20))
            o = torch.minimum(r * a[i], r.clamp(1 - eps, 1 + eps) * a[i])
            total = total + (torch.maximum(o, c * a[i]) if c is not None and a[i] < 0 else o) * m[i]
        return -total / m.sum()
    for b in range(logp.shape[0]):
        start = 0
        n = int(m[b].sum())
        for t in range(n):
            if bool(ends[b, t]):
                lr = (logp[b, start : t + 1] - old[b, start : t + 1]).clamp(-20, 20)
                s = torch.exp(lr.mean())
                for u in range(start, t + 1):
                    o = torch.minimum(s * a[b, u], s.clamp(1 - eps, 1 + eps) * a[b, u])
                    total = total + (torch.maximum(o, c * a[b, u]) if c is not None and a[b, u] < 0 else o)
                start = t + 1
    return -total / m.sum()


def segment_po_cases() -> list:  # list[LossCase]
    from optarium.rl.segment_po import segment_policy_loss
    from optarium.testing.losses import LossCase

    p = functools.partial
    return [
        LossCase("segment-po-singleton", segment_policy_loss, reference=_ref),
        LossCase(
            "segment-po-stride3",
            _strided_loss,
            reference=p(_ref, stride=3),
            exempt={"on_policy": _SHARED_ADVANTAGE},
        ),
        LossCase(
            "segment-po-stride3-eps0.1-nodual",
            p(_strided_loss, clip_eps=0.1, dual_clip=None),
            reference=p(_ref, eps=0.1, c=None, stride=3),
            exempt={"on_policy": _SHARED_ADVANTAGE},
        ),
    ]
