"""GIPO's loss and its baselines: the spec's tests 1-9 (trust weight, limits, stop-gradient, safety)."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.rl import ppo_clip_loss
from optarium.rl.gipo import (
    dual_clip_loss,
    gipo_loss,
    is_loss,
    soft_gate_loss,
    truncated_is_loss,
    trust_weight,
)

D = torch.float64


def _batch(n: int = 12, seed: int = 0, spread: float = 0.6) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    old = -0.1 - 2.0 * torch.rand(n, generator=g, dtype=D)
    lp = old + spread * torch.randn(n, generator=g, dtype=D)
    adv = torch.randn(n, generator=g, dtype=D)
    return lp, old, adv


def _grad(fn, lp, old, adv, **kw):
    x = lp.clone().requires_grad_(True)
    loss, diag = fn(x, old, adv, **kw)
    (g,) = torch.autograd.grad(loss, x)
    return loss.detach(), g, diag


def test_trust_weight_kernels() -> None:
    x = torch.linspace(-3, 3, 13, dtype=D)
    w = trust_weight(x, 1.3)
    assert float(trust_weight(torch.zeros((), dtype=D))) == 1.0
    assert torch.allclose(w, trust_weight(-x, 1.3), rtol=0, atol=0)  # w(r) = w(1/r)
    half = trust_weight(x[6:], 1.3)
    assert bool((half[1:] < half[:-1]).all())  # decreasing in |log r|
    assert torch.allclose(w, torch.exp(-0.5 * (x / 1.3) ** 2))
    assert torch.allclose(trust_weight(x, 0.7, "laplacian"), torch.exp(-x.abs() / 0.7))
    assert torch.allclose(trust_weight(x, 0.7, "cauchy"), 1 / (1 + (x / 0.7) ** 2))


def test_on_policy_limit_all_objectives_give_the_policy_gradient() -> None:
    _, old, adv = _batch()
    ref = -adv / adv.numel()
    for fn in (gipo_loss, ppo_clip_loss, is_loss, soft_gate_loss, dual_clip_loss, truncated_is_loss):
        _, g, _ = _grad(fn, old, old, adv)
        assert torch.allclose(g, ref, rtol=1e-12, atol=1e-15), fn.__name__


def test_large_sigma_reduces_to_no_clip() -> None:
    lp, old, adv = _batch()
    _, g, _ = _grad(gipo_loss, lp, old, adv, sigma=1e6, sigma_neg=1e6)
    _, g_is, _ = _grad(is_loss, lp, old, adv)
    assert torch.allclose(g, g_is, rtol=1e-9, atol=0)


def test_gradient_is_stop_gradient_weighted_policy_gradient() -> None:
    lp, old, adv = _batch(seed=3)
    _, g, _ = _grad(gipo_loss, lp, old, adv, sigma=0.8, sigma_neg=0.3)
    x = lp - old
    s = torch.where(adv > 0, torch.tensor(0.8, dtype=D), torch.tensor(0.3, dtype=D))
    w = torch.exp(-0.5 * (x / s) ** 2)
    r = x.exp()
    hand = -(w * r * adv) / adv.numel()  # d log pi / d logp = 1
    assert torch.allclose(g, hand, rtol=1e-12, atol=1e-16)
    # differentiating through the weight (no detach) would give a different gradient
    y = lp.clone().requires_grad_(True)
    xr = y - old
    no_sg = -(torch.exp(-0.5 * (xr / s) ** 2) * xr.exp() * adv).mean()
    (g_no_sg,) = torch.autograd.grad(no_sg, y)
    assert (g_no_sg - g).abs().max() > 1e-3


def test_nonzero_gradient_where_ppo_is_zero() -> None:
    old = torch.zeros(1, dtype=D)
    lp = torch.log(torch.tensor([3.0], dtype=D))
    adv = torch.ones(1, dtype=D)
    _, g_ppo, d_ppo = _grad(ppo_clip_loss, lp, old, adv)
    assert float(g_ppo.abs().max()) == 0.0 and float(d_ppo["zero_grad_frac"]) == 1.0
    _, g, d = _grad(gipo_loss, lp, old, adv)
    assert float(-g) == pytest.approx(math.exp(-0.5 * math.log(3) ** 2) * 3, rel=1e-12)
    assert float(d["zero_grad_frac"]) == 0.0
    _, _, d_dual = _grad(dual_clip_loss, lp, old, adv)
    assert float(d_dual["zero_grad_frac"]) == 1.0


def test_zero_grad_frac_matches_the_autograd_zero_pattern() -> None:
    # token-mean losses are separable: sample i has no gradient iff d loss / d logp_i == 0
    lp, old, adv = _batch(n=60, spread=0.5)
    adv[:4] = 0.0
    for fn, kw in (
        (ppo_clip_loss, {"clip_eps": 0.1}),
        (ppo_clip_loss, {"clip_eps": 0.2}),
        (dual_clip_loss, {}),
    ):
        _, g, d = _grad(fn, lp, old, adv, **kw)
        frac = float((g == 0).to(D).mean())
        assert 0.0 < frac < 1.0 and float(d["zero_grad_frac"]) == pytest.approx(frac, abs=1e-15), (fn, kw)


def test_asymmetric_sigma_uses_the_narrow_kernel_for_negative_advantages() -> None:
    old = torch.zeros(2, dtype=D)
    lp = torch.tensor([0.5, 0.5], dtype=D)
    adv = torch.tensor([1.0, -1.0], dtype=D)
    _, _, d = _grad(gipo_loss, lp, old, adv, sigma=1.0)
    w_pos, w_neg = math.exp(-0.5 * 0.25), math.exp(-0.5 * (0.5 / 0.5) ** 2)
    assert float(d["mean_w"]) == pytest.approx((w_pos + w_neg) / 2, rel=1e-12)


def test_numerical_safety_at_extreme_log_ratios() -> None:
    old = torch.zeros(2, dtype=D)
    lp = torch.tensor([50.0, -50.0], dtype=D)
    adv = torch.tensor([1.0, 1.0], dtype=D)
    loss, g, _d = _grad(gipo_loss, lp, old, adv)
    assert bool(torch.isfinite(loss)) and bool(torch.isfinite(g).all())
    w = trust_weight(torch.log(torch.tensor([1e-9], dtype=D)), 1.0)  # log r = -50 floored at 1e-9
    assert 0 < float(w) < 1e-80
    lp32, old32, adv32 = (t.float() for t in (lp, old, adv))
    loss32, g32, _ = _grad(gipo_loss, lp32, old32, adv32)
    assert bool(torch.isfinite(loss32)) and bool(torch.isfinite(g32).all())


def test_dual_clip_truncated_is_and_gate_formulas() -> None:
    old = torch.zeros(3, dtype=D)
    lp = torch.log(torch.tensor([5.0, 2.0, 0.5], dtype=D))
    adv = torch.tensor([-1.0, -1.0, 1.0], dtype=D)
    loss, g, _ = _grad(dual_clip_loss, lp, old, adv)
    # r = 5, A < 0: PPO gives -5, the dual clip bounds it at -3 (no gradient); r = 2: -2 (gradient)
    assert float(loss) == pytest.approx(-(-3.0 - 2.0 + 0.5) / 3)
    assert g.tolist() == pytest.approx([0.0, 2.0 / 3, -0.5 / 3])
    _, g_t, _ = _grad(truncated_is_loss, lp, old, adv)
    assert g_t.tolist() == pytest.approx([1.0 / 3, 1.0 / 3, -0.5 / 3])
    _, g_s, _ = _grad(soft_gate_loss, lp, old, adv)
    sg = torch.sigmoid(torch.tensor([2 * 4.0, 2 * 1.0, -0.5], dtype=D))
    assert g_s.tolist() == pytest.approx((-(4 * sg * (1 - sg) * lp.exp() * adv) / 3).tolist(), rel=1e-10)


def test_bad_input() -> None:
    lp, old, adv = _batch()
    with pytest.raises(ValueError, match=r"^sigma"):
        gipo_loss(lp, old, adv, sigma=0.0)
    with pytest.raises(ValueError, match=r"^sigma_neg"):
        gipo_loss(lp, old, adv, sigma_neg=-1.0)
    with pytest.raises(ValueError, match=r"^kernel"):
        gipo_loss(lp, old, adv, kernel="box")
    with pytest.raises(ValueError, match=r"^old_logp"):
        gipo_loss(lp, old[:3], adv)
    with pytest.raises(ValueError, match=r"^advantages"):
        gipo_loss(lp, old, adv[:3])
    with pytest.raises(ValueError, match=r"^dual_clip"):
        dual_clip_loss(lp, old, adv, dual_clip=0.5)
    with pytest.raises(TypeError, match=r"^log_ratio"):
        trust_weight([0.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^sigma"):
        trust_weight(lp, torch.tensor([-1.0]))


def test_dtype_follows_and_deterministic() -> None:
    lp, old, adv = _batch()
    a, _ = gipo_loss(lp.float(), old.float(), adv.float())
    b, _ = gipo_loss(lp.float(), old.float(), adv.float())
    assert a.dtype == torch.float32 and float(a) == float(b)
