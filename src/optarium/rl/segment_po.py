r"""Segment-Aligned Policy Optimization (SAPO; optarium name ``SegmentAlignedPO``): segment-level credit
assignment and segment importance sampling for RL on reasoning traces.

Paper: L. Gao, Z. Li, M. Jia, J. Yuan, H. Sun, H. Sun, X. Li, "Segment-Aligned Policy Optimization for
Multi-Modal Reasoning", ICML 2026, arXiv:2605.01327; official code github.com/Graysonicc/SAPO (a verl 0.4.1
fork; read for the definitions only, nothing copied). Not the prompt-selection SAPO nor the soft-gate SAPO of
:mod:`optarium.rl.gipo`.

The pieces, on padded ``(B, T)`` batches of response tokens with a 0/1 ``mask``:

- :func:`entropy_segments` (paper §4.2): the :math:`k = \lceil (k\%/100)\,T_b \rceil` highest-entropy valid
  tokens of each response are segment **ends** (ties: the earlier position wins), and so is the last valid
  token; :func:`delimiter_segments`: ends at given delimiter tokens (the newline / ";" strategy of the
  ablation) plus the last valid token. Segments :math:`z_1..z_M` partition the valid tokens.
- :func:`segment_gae` (paper Eq. 6–7): segment rewards :math:`r_m` = sum of the token rewards in
  :math:`z_m`, :math:`\delta_m = r_m + \gamma V(s_{m+1}) - V(s_m)` with :math:`V(s_{M+1}) = 0`,
  :math:`\hat A_m = \sum_\ell (\gamma\lambda)^\ell \delta_{m+\ell}`, :math:`\hat R_m = \hat A_m + V(s_m)`;
  :math:`\hat A_m` is copied to every token of :math:`z_m`. ``value_at="start"`` (paper, default) reads
  :math:`V(s_m)` at the segment's first token (``values[t]`` is the value of the prefix before token ``t``,
  verl's convention), ``value_at="end"`` at its last token (the official code). Code extras, on by default:
  whitening over the valid tokens of the batch (verl's ``masked_whiten``: unbiased variance, ``1e-8`` inside
  the square root) and clamping to :math:`[-5, 5]`.
- :func:`segment_ratio` (paper Eq. 8): :math:`s_m = \exp(\tfrac1{|z_m|}\sum_{t\in z_m}
  [\log\pi_\theta - \log\pi_{old}])`, each token log-ratio clamped to :math:`[-20, 20]` first (code).
- :func:`segment_policy_loss` (paper Eq. 9): the clipped surrogate with the segment ratio,
  :math:`-\min(s_m \hat A, \mathrm{clip}(s_m, 1 \pm \epsilon)\hat A)` per token, token-mean aggregated, with
  verl's dual clip (bound :math:`c\,|\hat A|` for :math:`\hat A < 0`, :math:`c = 3`) kept as in the code;
  it follows the loss contract of :mod:`optarium.rl.losses` (``ends`` a keyword; ``None``: every token its
  own segment, which is token-level PPO with the dual clip).
- :func:`segment_value_loss` (paper Eq. 10): :math:`(V(s_m) - \hat R_m)^2` at the segment boundaries only
  (exactly :math:`M` terms per sequence), token-mean over the boundary terms of the batch (verl's
  aggregation) or the paper's per-sequence :math:`1/M` mean.

Deviations / reconstructions: the clip :math:`\epsilon` is not stated in the paper (verl's default 0.2 is
used); the training loop (paper Algorithm 1) on a tiny transformer and its experiment are not part of this
module yet.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch

from optarium._core.validation import check_choice, check_in_range, check_positive
from optarium.rl.losses import aggregate, check_batch

__all__ = [
    "delimiter_segments",
    "entropy_segments",
    "segment_gae",
    "segment_ids",
    "segment_policy_loss",
    "segment_ratio",
    "segment_value_loss",
]

_LOG_RATIO_CLAMP = 20.0


def _check_2d(name: str, t: object, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: must be a tensor, got {type(t).__name__}")
    if t.ndim != 2:
        raise ValueError(f"{name}: must have shape (batch, time), got {tuple(t.shape)}")
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: must have shape {tuple(shape)}, got {tuple(t.shape)}")
    return t


def _valid(mask: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    return _check_2d("mask", mask, shape) > 0


def _last_valid(valid: torch.Tensor) -> torch.Tensor:
    """Bool ``(B, T)``: the last valid position of each row (none for all-padding rows)."""
    pos = torch.arange(valid.shape[1], device=valid.device).expand_as(valid)
    last = torch.where(valid, pos, torch.full_like(pos, -1)).amax(1, keepdim=True)
    return (pos == last) & valid


def entropy_segments(entropy: torch.Tensor, mask: torch.Tensor, topk_percent: float = 30.0) -> torch.Tensor:
    """Segment ends (bool ``(B, T)``): the top-:math:`\\lceil k\\% \\cdot T_b\\rceil` entropy tokens of each
    response and its last valid token; padding is never an end.

    Args:
        entropy: ``(B, T)`` token entropies recorded during generation.
        mask: ``(B, T)`` 0/1 validity of the response tokens.
        topk_percent: :math:`k\\%` in (0, 100].
    """
    if entropy is None:
        raise ValueError("entropy: required for entropy-based segmentation, got None")
    _check_2d("entropy", entropy)
    valid = _valid(mask, tuple(entropy.shape))
    k_pct = check_in_range("topk_percent", topk_percent, 0.0, 100.0)
    if k_pct <= 0.0:
        raise ValueError(f"topk_percent: must be in (0, 100], got {topk_percent}")
    n = valid.sum(1, keepdim=True)
    # ceil(k% * T / 100) computed without float noise (e.g. 30 * 10 / 100 = 3.0000000000000004)
    k = torch.ceil(n.to(torch.float64) * k_pct / 100.0 - 1e-9).clamp_min(0).to(n.dtype)
    score = torch.where(valid, entropy.detach(), torch.full_like(entropy, -math.inf))
    order = torch.sort(score, dim=1, descending=True, stable=True).indices  # ties: earlier position first
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(order.shape[1], device=order.device).expand_as(order)
    )
    return ((rank < k) & valid) | _last_valid(valid)


def delimiter_segments(
    token_ids: torch.Tensor, mask: torch.Tensor, delimiter_ids: Iterable[int]
) -> torch.Tensor:
    """Segment ends (bool ``(B, T)``): the ``delimiter_ids`` tokens and each row's last valid token."""
    _check_2d("token_ids", token_ids)
    valid = _valid(mask, tuple(token_ids.shape))
    ids = sorted({int(i) for i in delimiter_ids})
    if not ids:
        raise ValueError("delimiter_ids: must name at least one token id")
    hit = torch.isin(token_ids, torch.tensor(ids, device=token_ids.device, dtype=token_ids.dtype))
    return (hit & valid) | _last_valid(valid)


def _check_ends(ends: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    _check_2d("ends", ends, tuple(valid.shape))
    if ends.dtype != torch.bool:
        raise TypeError(f"ends: must be a bool tensor, got {ends.dtype}")
    ends = ends & valid
    if bool((_last_valid(valid) & ~ends).any()):
        raise ValueError("ends: the last valid token of every response must end a segment")
    return ends


def segment_ids(ends: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(seg, n_segments)``: the segment index of every token (``(B, T)`` long; valid tokens in
    ``0..M_b-1``, padding gets ``M_b``) and ``M_b`` per row (``(B,)``)."""
    valid = _valid(mask, tuple(ends.shape))
    e = _check_ends(ends, valid).long()
    seg = e.cumsum(1) - e
    return torch.where(valid, seg, e.sum(1, keepdim=True)), e.sum(1)


def _segment_mean(x: torch.Tensor, seg: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per token: the mean of ``x`` over its segment (0 on padding); differentiable, vectorised."""
    b, t = x.shape
    flat = (seg + torch.arange(b, device=x.device).unsqueeze(1) * (t + 1)).reshape(-1)
    xv = torch.where(valid, x, torch.zeros_like(x)).reshape(-1)
    tot = x.new_zeros(b * (t + 1)).index_add(0, flat, xv)
    cnt = x.new_zeros(b * (t + 1)).index_add(0, flat, valid.reshape(-1).to(x.dtype))
    mean = tot / cnt.clamp_min(1.0)
    return torch.where(valid, mean[flat].view(b, t), torch.zeros_like(x))


def segment_ratio(
    logp: torch.Tensor, old_logp: torch.Tensor, ends: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """The segment importance ratio :math:`s_m` broadcast to its tokens (``(B, T)``; 1 on padding)."""
    _check_2d("logp", logp)
    _check_2d("old_logp", old_logp, tuple(logp.shape))
    valid = _valid(mask, tuple(logp.shape))
    seg, _ = segment_ids(ends, mask)
    lr = torch.where(valid, logp - old_logp.detach(), torch.zeros_like(logp))
    lr = lr.clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    return _segment_mean(lr, seg, valid).exp()


def _whiten(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    n = valid.sum()
    if int(n) < 2:  # no spread to scale by: only centre
        return torch.where(valid, x - x[valid].sum() / n.clamp_min(1), torch.zeros_like(x))
    xv = x[valid]
    mean = xv.mean()
    var = ((xv - mean) ** 2).sum() / (n - 1)
    return torch.where(valid, (x - mean) * torch.rsqrt(var + 1e-8), torch.zeros_like(x))


@torch.no_grad()
def segment_gae(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    ends: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    lam: float = 0.99,
    value_at: str = "start",
    whiten: bool = True,
    clamp: float | None = 5.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Segment-level GAE (paper Eq. 6–7): ``(advantages, returns)``, both ``(B, T)`` with each segment's
    :math:`\\hat A_m` / :math:`\\hat R_m` on all its tokens (0 on padding). ``returns`` are not whitened.

    Args:
        token_rewards: ``(B, T)`` per-token rewards (outcome reward on the last token, KL penalty folded in).
        values: ``(B, T)`` critic values, ``values[b, t]`` the value of the prefix before token ``t``.
        ends, mask: segment ends and validity (``(B, T)``).
        gamma, lam: discount and GAE parameter in [0, 1] over segments.
        value_at: ``"start"`` (paper) or ``"end"`` (official code): where :math:`V(s_m)` is read.
        whiten: whiten the advantages over the batch's valid tokens (code).
        clamp: clamp the (whitened) advantages to :math:`[-c, c]` (code: 5); ``None`` disables.
    """
    _check_2d("token_rewards", token_rewards)
    _check_2d("values", values, tuple(token_rewards.shape))
    gamma = check_in_range("gamma", gamma, 0.0, 1.0)
    lam = check_in_range("lam", lam, 0.0, 1.0)
    check_choice("value_at", value_at, ("start", "end"))
    if clamp is not None:
        clamp = check_positive("clamp", clamp)
    valid = _valid(mask, tuple(token_rewards.shape))
    seg, n_seg = segment_ids(ends, mask)
    b, t = token_rewards.shape
    m_max = max(int(n_seg.max()) if b else 0, 1)
    dt = values.dtype
    rows = torch.arange(b, device=values.device).unsqueeze(1).expand(b, t)
    seg_c = seg.clamp_max(m_max)  # padding goes to the scratch column m_max
    r_seg = values.new_zeros(b, m_max + 1).index_put_(
        (rows[valid], seg_c[valid]), token_rewards.to(dt)[valid], accumulate=True
    )[:, :m_max]
    e = ends & valid
    start = valid & torch.cat([torch.ones_like(e[:, :1]), e[:, :-1]], 1)  # first token of each segment
    where = start if value_at == "start" else e
    v_seg = values.new_zeros(b, m_max + 1).index_put_((rows[where], seg_c[where]), values[where])[:, :m_max]
    seg_valid = torch.arange(m_max, device=values.device).unsqueeze(0) < n_seg.unsqueeze(1)
    next_v = torch.cat([v_seg[:, 1:], v_seg.new_zeros(b, 1)], 1) * torch.cat(
        [seg_valid[:, 1:], seg_valid.new_zeros(b, 1)], 1
    ).to(dt)
    delta = (r_seg + gamma * next_v - v_seg) * seg_valid.to(dt)
    adv_seg = torch.empty_like(delta)
    acc = delta.new_zeros(b)
    for m in range(m_max - 1, -1, -1):  # the recursion over segments is inherently sequential
        acc = delta[:, m] + gamma * lam * acc
        adv_seg[:, m] = acc
    ret_seg = adv_seg + v_seg
    gather = seg.clamp_max(m_max - 1)
    adv = torch.where(valid, adv_seg.gather(1, gather), torch.zeros_like(values))
    ret = torch.where(valid, ret_seg.gather(1, gather), torch.zeros_like(values))
    if whiten:
        adv = _whiten(adv, valid)
    if clamp is not None:
        adv = adv.clamp(-clamp, clamp)
    return adv, ret


def segment_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    ends: torch.Tensor | None = None,
    clip_eps: float = 0.2,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
    """SAPO's clipped surrogate with the segment ratio (paper Eq. 9), in the loss contract.

    Args:
        logp, old_logp, advantages, mask: the batch (:mod:`optarium.rl.losses`); 1-d batches are one token
            per sequence.
        ends: bool segment ends of ``logp``'s shape (2-d); ``None``: every token is its own segment.
        clip_eps: :math:`\\epsilon > 0`.
        dual_clip: the dual-clip constant :math:`c > 1` for negative advantages (code: 3), ``None`` disables.
        aggregation: one of :data:`optarium.rl.losses.AGGREGATIONS`.
    """
    logp, old_logp, adv, m = check_batch(logp, old_logp, advantages, mask)
    clip_eps = check_positive("clip_eps", clip_eps)
    if dual_clip is not None:
        dual_clip = check_positive("dual_clip", dual_clip)
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip: must be > 1 or None, got {dual_clip}")
    valid = m > 0
    if ends is None or logp.ndim != 2:
        if ends is not None:
            raise ValueError(f"ends: needs a 2-d batch, got logp of shape {tuple(logp.shape)}")
        ends = valid
        lr = torch.where(valid, logp - old_logp, torch.zeros_like(logp)).clamp(
            -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP
        )
        ratio = lr.exp()
        n_seg = valid.to(logp.dtype).flatten(1).sum(-1) if logp.ndim > 1 else valid.to(logp.dtype)
    else:
        if not isinstance(ends, torch.Tensor):
            raise TypeError(f"ends: must be a bool tensor or None, got {type(ends).__name__}")
        _check_2d("ends", ends, tuple(logp.shape))
        ratio = segment_ratio(logp, old_logp, ends, m)
        n_seg = (ends & valid).sum(1).to(logp.dtype)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv
    obj = torch.minimum(unclipped, clipped)
    if dual_clip is not None:
        obj = torch.where(adv < 0, torch.maximum(obj, dual_clip * adv), obj)
    loss = aggregate(-obj, m, aggregation)
    with torch.no_grad():
        n = m.sum().clamp_min(1.0)
        tok_lr = torch.where(valid, logp - old_logp, torch.zeros_like(logp))
        diagnostics = {
            "clip_fraction": (((ratio - 1.0).abs() > clip_eps).to(m) * m).sum() / n,
            "approx_kl": (((tok_lr.exp() - 1.0) - tok_lr) * m).sum() / n,
            "ratio_mean": (ratio * m).sum() / n,
            "segments_per_sequence": n_seg.mean() if n_seg.numel() else logp.new_zeros(()),
        }
    return loss, diagnostics


def segment_value_loss(
    values: torch.Tensor,
    returns: torch.Tensor,
    ends: torch.Tensor,
    mask: torch.Tensor,
    *,
    value_at: str = "start",
    aggregation: str = "token-mean",
) -> torch.Tensor:
    """Boundary-only critic loss (paper Eq. 10): :math:`(V(s_m) - \\hat R_m)^2` at the position where
    :func:`segment_gae` reads :math:`V(s_m)` (``value_at``), averaged over the boundary terms of the batch
    (``token-mean``, verl) or per sequence then over sequences (``seq-mean-token-mean``, the paper's 1/M)."""
    _check_2d("values", values)
    _check_2d("returns", returns, tuple(values.shape))
    check_choice("value_at", value_at, ("start", "end"))
    valid = _valid(mask, tuple(values.shape))
    e = _check_ends(ends, valid)
    start = valid & torch.cat([torch.ones_like(e[:, :1]), e[:, :-1]], 1)
    bound = (start if value_at == "start" else e).to(values.dtype)
    return aggregate((values - returns.detach()) ** 2, bound, aggregation)
