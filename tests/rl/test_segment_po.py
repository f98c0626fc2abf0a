"""Tests of optarium.rl.segment_po (SAPO): segmentation, segment GAE, segment ratio, losses, limits."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.rl import segment_po as sp
from optarium.rl.advantages import gae
from optarium.rl.ppo import ppo_clip_loss

D = torch.float64


def _mask(lengths, t):
    return (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(D)


def _random(seed=0, lengths=(7, 4, 9, 1), t=9):
    g = torch.Generator().manual_seed(seed)
    b = len(lengths)
    mask = _mask(lengths, t)
    old = -0.05 - 2.9 * torch.rand(b, t, generator=g, dtype=D)
    logp = old + 0.1 * torch.randn(b, t, generator=g, dtype=D)
    ent = torch.rand(b, t, generator=g, dtype=D)
    values = torch.randn(b, t, generator=g, dtype=D)
    rewards = torch.zeros(b, t, dtype=D)
    rewards[torch.arange(b), torch.tensor(lengths) - 1] = torch.rand(b, generator=g, dtype=D)
    rewards += 0.01 * torch.randn(b, t, generator=g, dtype=D) * mask  # per-token KL-like terms
    return logp, old, ent, values, rewards, mask


# 1. segmentation
def test_entropy_segments_topk_and_last_token():
    ent = torch.tensor([[0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.05, 5.0, 5.0, 5.0]], dtype=D)
    mask = _mask([7], 10)  # 7 valid tokens: k = ceil(0.3 * 7) = 3; padding holds the largest entropies
    ends = sp.entropy_segments(ent, mask, 30.0)
    assert ends.tolist() == [[False, True, False, True, False, True, True, False, False, False]]
    # last token already in the top-k: exactly k ends
    ent2 = torch.tensor([[0.1, 0.9, 0.2, 0.3, 0.8]], dtype=D)
    assert sp.entropy_segments(ent2, _mask([5], 5), 40.0).sum() == 2  # ceil(0.4*5) = 2: {1, 4}
    # k% * T with float noise (30% of 10 = 3, not 4)
    ends3 = sp.entropy_segments(torch.arange(10, dtype=D).unsqueeze(0), _mask([10], 10), 30.0)
    assert ends3.sum() == 3


def test_entropy_segments_ties_and_counts():
    ent = torch.ones(1, 6, dtype=D)
    ends = sp.entropy_segments(ent, _mask([6], 6), 50.0)  # ties: the earlier positions win, plus the last
    assert ends.tolist() == [[True, True, True, False, False, True]]
    _, _, ent, _, _, mask = _random(3)
    ends = sp.entropy_segments(ent, mask, 30.0)
    n = mask.sum(1)
    k = torch.ceil(0.3 * n - 1e-9)
    last = (n - 1).long()
    last_in_topk = torch.tensor(
        [bool(ent[b, : int(n[b])].argsort(descending=True)[: int(k[b])].eq(last[b]).any()) for b in range(4)]
    )
    assert torch.equal(ends.sum(1).to(D), torch.where(last_in_topk, k, k + 1))
    assert not bool((ends & (mask == 0)).any())
    seg, m = sp.segment_ids(ends, mask)
    for b in range(4):  # the segments partition the valid tokens, in order
        s = seg[b, : int(n[b])]
        assert s[0] == 0 and bool((s.diff() >= 0).all()) and int(s[-1]) == int(m[b]) - 1


def test_delimiter_segments():
    ids = torch.tensor([[3, 9, 4, 9, 5, 1], [9, 2, 2, 0, 0, 0]])
    mask = _mask([5, 3], 6)
    ends = sp.delimiter_segments(ids, mask, {9})
    assert ends.tolist() == [
        [False, True, False, True, True, False],
        [True, False, True, False, False, False],
    ]
    with pytest.raises(ValueError, match="delimiter_ids"):
        sp.delimiter_segments(ids, mask, [])


# 2. limit k% = 100: token-level GAE and PPO
def test_topk100_equals_token_level_gae_and_ppo():
    logp, old, ent, values, rewards, mask = _random(1)
    ends = sp.entropy_segments(ent, mask, 100.0)
    assert torch.equal(ends, mask > 0)
    adv, ret = sp.segment_gae(rewards, values, ends, mask, gamma=0.97, lam=0.9, whiten=False, clamp=None)
    lengths = mask.sum(1).long()
    dones = torch.zeros_like(mask)
    dones[torch.arange(4), lengths - 1] = 1.0
    ref_adv, ref_ret = gae(
        (rewards * mask).T, (values * mask).T, dones.T, torch.zeros(4, dtype=D), gamma=0.97, lam=0.9
    )
    v = mask > 0
    torch.testing.assert_close(adv[v], ref_adv.T[v], rtol=0, atol=1e-12)
    torch.testing.assert_close(ret[v], ref_ret.T[v], rtol=0, atol=1e-12)
    a = adv.detach()
    loss, _ = sp.segment_policy_loss(logp, old, a, mask, ends=ends, dual_clip=None)
    ref, _ = ppo_clip_loss(logp, old, a, mask)
    torch.testing.assert_close(loss, ref, rtol=0, atol=1e-12)
    loss0, _ = sp.segment_policy_loss(logp, old, a, mask, ends=None, dual_clip=None)
    torch.testing.assert_close(loss0, ref, rtol=0, atol=1e-12)


# 3. single segment: GSPO-style sequence ratio
def test_single_segment_is_sequence_level():
    logp, old, _, values, rewards, mask = _random(2)
    ends = sp.delimiter_segments(torch.zeros_like(mask, dtype=torch.long), mask, {1})  # only last tokens
    ratio = sp.segment_ratio(logp, old, ends, mask)
    seq = torch.exp(((logp - old) * mask).sum(1) / mask.sum(1))
    v = mask > 0
    torch.testing.assert_close(ratio[v], seq.unsqueeze(1).expand_as(ratio)[v], rtol=0, atol=1e-14)
    adv, _ = sp.segment_gae(rewards, values, ends, mask, whiten=False, clamp=None)
    for b in range(4):
        row = adv[b][v[b]]
        assert bool((row == row[0]).all())  # one advantage per sequence
        # gamma = 1: A = sum of rewards - V(s_1)
        assert math.isclose(float(row[0]), float(rewards[b][v[b]].sum() - values[b, 0]), abs_tol=1e-12)


# 4. segment GAE by hand
def test_segment_gae_hand_computed():
    r = torch.tensor([[0.0, 0.5, 0.0, 0.0, 0.2, 1.0]], dtype=D)
    v = torch.tensor([[0.1, 9.0, 0.3, 9.0, 0.6, 9.0]], dtype=D)
    ends = torch.tensor([[False, True, False, True, False, True]])
    mask = torch.ones(1, 6, dtype=D)
    adv, ret = sp.segment_gae(r, v, ends, mask, gamma=0.9, lam=0.8, whiten=False, clamp=None)
    # r_seg = (0.5, 0, 1.2), V = (0.1, 0.3, 0.6): d3 = 0.6, d2 = 0.9*0.6 - 0.3, d1 = 0.5 + 0.9*0.3 - 0.1
    a3 = 0.6
    a2 = 0.24 + 0.72 * a3
    a1 = 0.67 + 0.72 * a2
    expect = torch.tensor([[a1, a1, a2, a2, a3, a3]], dtype=D)
    torch.testing.assert_close(adv, expect, rtol=0, atol=1e-12)
    torch.testing.assert_close(ret, expect + torch.tensor([[0.1, 0.1, 0.3, 0.3, 0.6, 0.6]], dtype=D))
    # the code's convention: V(s_m) read at the segment's last token
    ve = torch.tensor([[9.0, 0.1, 9.0, 0.3, 9.0, 0.6]], dtype=D)
    adv_e, _ = sp.segment_gae(r, ve, ends, mask, gamma=0.9, lam=0.8, value_at="end", whiten=False, clamp=None)
    torch.testing.assert_close(adv_e, expect, rtol=0, atol=1e-12)


# 5. segment ratio
def test_segment_ratio_properties():
    logp, old, ent, _, _, mask = _random(4)
    ends = sp.entropy_segments(ent, mask, 30.0)
    v = mask > 0
    torch.testing.assert_close(sp.segment_ratio(old, old, ends, mask)[v], torch.ones_like(old)[v])
    single = mask > 0
    torch.testing.assert_close(sp.segment_ratio(logp, old, single, mask)[v], torch.exp(logp - old)[v])
    # length normalisation: a segment with the same log-ratio c on every token has ratio exp(c)
    c = 0.17
    ratio = sp.segment_ratio(old + c, old, ends, mask)
    torch.testing.assert_close(ratio[v], torch.full_like(old, math.exp(c))[v])
    # padding holding garbage changes nothing
    lp2 = torch.where(v, logp, torch.full_like(logp, 1e6))
    torch.testing.assert_close(
        sp.segment_ratio(lp2, old, ends, mask)[v], sp.segment_ratio(logp, old, ends, mask)[v]
    )


# 6. gradient = Eq. 13 with clipping inactive
def test_gradient_matches_eq13_on_a_tiny_policy():
    g = torch.Generator().manual_seed(5)
    b, t, vocab, d = 3, 6, 5, 4
    feats = torch.randn(b, t, d, generator=g, dtype=D)
    actions = torch.randint(vocab, (b, t), generator=g)
    w_old = torch.randn(d, vocab, generator=g, dtype=D)
    w = (w_old + 0.01 * torch.randn(d, vocab, generator=g, dtype=D)).requires_grad_(True)
    mask = _mask([6, 4, 5], t)
    ends = sp.entropy_segments(torch.rand(b, t, generator=g, dtype=D), mask, 40.0)

    def logp_of(weight):
        return torch.log_softmax(feats @ weight, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    old = logp_of(w_old).detach()
    seg_adv, _ = sp.segment_gae(
        torch.randn(b, t, generator=g, dtype=D) * mask,
        torch.zeros(b, t, dtype=D),
        ends,
        mask,
        whiten=False,
        clamp=None,
    )
    loss, diag = sp.segment_policy_loss(logp_of(w), old, seg_adv, mask, ends=ends, clip_eps=0.2)
    assert float(diag["clip_fraction"]) == 0.0
    (grad,) = torch.autograd.grad(loss, w)
    s = sp.segment_ratio(logp_of(w), old, ends, mask).detach()
    n = mask.sum()
    # Eq. 13: sum_m s_m A_m sum_{t in z_m} grad log pi_t, i.e. weight s_m A_m on every token of the segment
    manual = -((s * seg_adv * mask).detach() * logp_of(w)).sum() / n
    (g_ref,) = torch.autograd.grad(manual, w)
    torch.testing.assert_close(grad, g_ref, rtol=1e-10, atol=1e-13)


def test_on_policy_gradient_with_segment_advantages():
    _, old, ent, values, rewards, mask = _random(6)
    ends = sp.entropy_segments(ent, mask, 30.0)
    adv, _ = sp.segment_gae(rewards, values, ends, mask)
    x = old.clone().requires_grad_(True)
    loss, _ = sp.segment_policy_loss(x, old, adv, mask, ends=ends)
    (g,) = torch.autograd.grad(loss, x)
    torch.testing.assert_close(g, -adv * mask / mask.sum(), rtol=1e-12, atol=1e-15)


# 7. value loss at boundaries
@pytest.mark.parametrize("value_at", ["start", "end"])
def test_value_loss_uses_m_terms_per_sequence(value_at):
    _, _, ent, values, rewards, mask = _random(7)
    ends = sp.entropy_segments(ent, mask, 30.0)
    _, ret = sp.segment_gae(rewards, values, ends, mask, value_at=value_at)
    _, m = sp.segment_ids(ends, mask)
    v = values.clone().requires_grad_(True)
    loss = sp.segment_value_loss(v, ret, ends, mask, value_at=value_at)
    (g,) = torch.autograd.grad(loss, v)
    assert int((g != 0).sum()) <= int(m.sum())
    nz = (g.abs() > 0) | (v.detach() == ret)
    assert torch.equal(nz.sum(1), m)  # exactly M boundary terms per row
    e = ends & (mask > 0)
    start = (mask > 0) & torch.cat([torch.ones_like(e[:, :1]), e[:, :-1]], 1)
    pos = start if value_at == "start" else e
    expect = ((values - ret)[pos] ** 2).mean()
    torch.testing.assert_close(loss, expect)
    per_seq = sp.segment_value_loss(
        values, ret, ends, mask, value_at=value_at, aggregation="seq-mean-token-mean"
    )
    rows = torch.stack([((values[b] - ret[b])[pos[b]] ** 2).mean() for b in range(4)]).mean()
    torch.testing.assert_close(per_seq, rows)


# 8. whitening + clamp
def test_whitening_and_clamp():
    _, _, ent, values, rewards, mask = _random(8)
    ends = sp.entropy_segments(ent, mask, 30.0)
    adv, _ = sp.segment_gae(rewards, values, ends, mask, whiten=True, clamp=None)
    v = mask > 0
    assert abs(float(adv[v].mean())) < 1e-12
    assert abs(float(adv[v].std()) - 1.0) < 1e-6
    assert bool((adv[~v] == 0).all())
    # one huge reward on a length-1 response among 40 long ones: beyond 5 standard deviations
    _, _, ent, values, rewards, mask = _random(8, lengths=(9,) * 40 + (1,))
    rewards[40, 0] = 1e4
    ends = sp.entropy_segments(ent, mask, 30.0)
    adv_c, _ = sp.segment_gae(rewards, values, ends, mask, whiten=True, clamp=5.0)
    adv_u, _ = sp.segment_gae(rewards, values, ends, mask, whiten=True, clamp=None)
    assert float(adv_u.abs().max()) > 5.0
    torch.testing.assert_close(adv_c, adv_u.clamp(-5, 5))


# 9. bad input and edge cases
def test_bad_input():
    logp, old, ent, values, rewards, mask = _random(9)
    for k in (0.0, -1.0, 100.5):
        with pytest.raises(ValueError, match="topk_percent"):
            sp.entropy_segments(ent, mask, k)
    with pytest.raises(ValueError, match="entropy"):
        sp.entropy_segments(None, mask)
    with pytest.raises(ValueError, match="mask"):
        sp.entropy_segments(ent, mask[:, :-1])
    ends = sp.entropy_segments(ent, mask)
    with pytest.raises(ValueError, match="values"):
        sp.segment_gae(rewards, values[:2], ends, mask)
    with pytest.raises(ValueError, match="value_at"):
        sp.segment_gae(rewards, values, ends, mask, value_at="middle")
    with pytest.raises(TypeError, match="ends"):
        sp.segment_ratio(logp, old, ends.to(D), mask)
    bad = ends.clone()
    bad[0, 6] = False  # the last valid token of row 0 no longer ends a segment
    with pytest.raises(ValueError, match="ends"):
        sp.segment_ratio(logp, old, bad, mask)
    with pytest.raises(ValueError, match="ends"):
        sp.segment_policy_loss(logp, old, values, mask, ends=ends[:, :-1])
    with pytest.raises(ValueError, match="dual_clip"):
        sp.segment_policy_loss(logp, old, values, mask, ends=ends, dual_clip=0.5)


def test_all_padding_rows_no_nan():
    logp, old, ent, values, rewards, mask = _random(10)
    mask[1] = 0.0
    ends = sp.entropy_segments(ent, mask)
    assert not bool(ends[1].any())
    adv, ret = sp.segment_gae(rewards, values, ends, mask)
    ratio = sp.segment_ratio(logp, old, ends, mask)
    loss, diag = sp.segment_policy_loss(logp, old, adv, mask, ends=ends)
    vloss = sp.segment_value_loss(values, ret, ends, mask)
    for x in (adv, ret, ratio, loss, vloss, *diag.values()):
        assert bool(torch.isfinite(x).all())
    empty = torch.zeros(2, 5, dtype=D)
    e = sp.entropy_segments(empty, empty)
    a, _ = sp.segment_gae(empty, empty, e, empty)
    assert (
        bool(torch.isfinite(a).all())
        and float(sp.segment_policy_loss(empty, empty, a, empty, ends=e)[0]) == 0.0
    )


def test_float32_and_determinism():
    logp, old, ent, values, rewards, mask = (x.float() for x in _random(11))
    ends = sp.entropy_segments(ent, mask)
    a1, r1 = sp.segment_gae(rewards, values, ends, mask)
    a2, r2 = sp.segment_gae(rewards, values, ends, mask)
    assert a1.dtype == torch.float32 and torch.equal(a1, a2) and torch.equal(r1, r2)
    loss, _ = sp.segment_policy_loss(logp, old, a1, mask, ends=ends)
    assert loss.dtype == torch.float32
