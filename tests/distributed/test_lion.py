"""DistributedLion: unbiased sign, reductions to centralised Lion / Lion-VR, bit counts, world size 1 vs 2."""

from __future__ import annotations

import copy
import sys

import pytest
import torch

from optarium.distributed.comm import Communicator
from optarium.distributed.lion import DistributedLion, per_client_grads, unbiased_sign
from optarium.optim._nonfinite import NonFiniteGradientError
from optarium.optim.lion_vr import Lion, LionVR
from optarium.problems.nonconvex_logistic import make_nonconvex_logistic

D = 24


def _prob(dtype: torch.dtype = torch.float64):
    return make_nonconvex_logistic(n=200, dim=D, alpha=0.1, flip=0.1, seed=1, dtype=dtype)


def _batches(n: int, steps: int, b: int = 4) -> torch.Tensor:
    return torch.randint(200, (steps, n, b), generator=torch.Generator().manual_seed(5))


def test_unbiased_sign_monte_carlo_and_range() -> None:
    R = 2.0
    v = torch.linspace(-R, R, 21, dtype=torch.float64)
    draws = 100_000
    gen = torch.Generator().manual_seed(0)
    s = unbiased_sign(v.expand(draws, -1), R, generator=gen)
    assert bool(((s == 1) | (s == -1)).all())
    est = (R * s).mean(0)
    se = R * torch.sqrt(1 - (v / R) ** 2).clamp_min(1e-12) / draws**0.5
    assert bool(((est - v).abs() <= 4 * se + 1e-12).all())  # exact at |v| = R (deterministic sign)
    with pytest.raises(ValueError, match=r"^v:"):
        unbiased_sign(torch.tensor([3.0]), 2.0)
    clipped = unbiased_sign(torch.tensor([3.0, -5.0]), 2.0, clip=True)
    assert clipped.tolist() == [1.0, -1.0]
    with pytest.raises(ValueError, match=r"^radius:"):
        unbiased_sign(torch.tensor([0.1]), 0.0)


def _run_dist(opt: DistributedLion, prob, batches: torch.Tensor, steps: int) -> list[torch.Tensor]:
    cur: list[torch.Tensor] = []
    grad_fn = per_client_grads(lambda xs: _client_losses(prob, xs[0], cur[0]), batches.shape[1])
    out = []
    for t in range(steps):
        cur[:] = [batches[t]]
        opt.step(grad_fn)
        out.append(opt.param_groups[0]["params"][0].detach().clone())
    return out


def _client_losses(prob, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    # x: (n, d) one copy per client, idx: (n, B)
    margins = torch.einsum("kbd,kd->kb", prob.a[idx], x) * prob.y[idx]
    data = torch.nn.functional.softplus(-margins).mean(-1)
    return data + prob.alpha * (x * x / (1 + x * x)).sum(-1)


def test_per_client_grads_match_the_analytic_gradient() -> None:
    prob = _prob()
    idx = _batches(3, 1)[0]
    x = torch.randn(D, dtype=torch.float64)
    (g,) = per_client_grads(lambda xs: _client_losses(prob, xs[0], idx), 3)([x])
    torch.testing.assert_close(g, prob.grad(x.expand(3, D), idx), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("vr", [False, True])
@pytest.mark.parametrize("compression", ["none", "sign"])
def test_one_client_is_centralised_lion(vr: bool, compression: str) -> None:
    """n = 1: the full-precision and the deterministic-sign paths are Lion / Lion-VR, bit for bit."""
    prob = _prob()
    steps = 40
    batches = _batches(1, steps)
    x = torch.zeros(D, dtype=torch.float64)
    opt = DistributedLion(
        [x],
        Communicator.local(1),
        lr=1e-2,
        betas=(0.9, 0.99),
        weight_decay=0.1,
        compression=compression,
        variance_reduction=vr,
    )
    ours = _run_dist(opt, prob, batches, steps)
    p = torch.zeros(D, dtype=torch.float64, requires_grad=True)
    ref = (LionVR if vr else Lion)([p], lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    for t in range(steps):
        idx = batches[t, 0]

        def closure(idx: torch.Tensor = idx) -> torch.Tensor:
            p.grad = prob.grad(p.detach(), idx)
            return torch.zeros(())

        ref.step(closure)
        assert torch.equal(ours[t], p.detach()), f"step {t}"


def test_full_precision_is_centralised_lion_with_the_averaged_gradient() -> None:
    prob = _prob()
    n, steps = 4, 30
    batches = _batches(n, steps)
    for identical in (False, True):
        b = batches[:, :1].expand(steps, n, -1) if identical else batches
        x = torch.zeros(D, dtype=torch.float64)
        ours = _run_dist(DistributedLion([x], Communicator.local(n), lr=1e-2), prob, b, steps)
        p = torch.zeros(D, dtype=torch.float64, requires_grad=True)
        ref = Lion([p], lr=1e-2)
        for t in range(steps):
            g = prob.grad(p.detach().expand(n, D), b[t])
            p.grad = g[0] if identical else g.sum(0) / n
            ref.step()
            torch.testing.assert_close(ours[t], p.detach(), rtol=0, atol=1e-12)


def test_unbiased_pipeline_moves_by_the_mean_of_c_over_r() -> None:
    """beta1 = 0, fixed R, unbiased server: E[x_t - x_{t+1}] = lr * mean_i(g_i) / R per coordinate."""
    n, d, steps, R = 5, 6, 1500, 1.0
    G = torch.rand(n, d, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 2 - 1
    x = torch.zeros(d, dtype=torch.float64)
    opt = DistributedLion(
        [x],
        Communicator.local(n),
        lr=1.0,
        betas=(0.0, 0.5),
        compression="unbiased_sign",
        server_rule="unbiased",
        radius=R,
        seed=3,
    )
    for _ in range(steps):
        opt.step(lambda xs: [G])
    mean_v = -x / steps
    target = G.mean(0) / R
    se = torch.sqrt(1 - target**2) / steps**0.5
    assert bool(((mean_v - target).abs() <= 4 * se).all())


@pytest.mark.parametrize(
    ("kwargs", "up", "down"),
    [
        ({"compression": "none"}, 32 * 200, 32 * 200),
        ({"compression": "unbiased_sign", "radius": 1.0}, 200, 200),
        ({"compression": "unbiased_sign"}, 200 + 32, 200 + 32),
        ({"compression": "sign"}, 200, 200),
    ],
)
def test_bit_counter_per_client_per_step_per_direction(kwargs: dict, up: int, down: int) -> None:
    d, n, steps = 200, 4, 3
    x = torch.zeros(d)  # float32: full precision sends 32-bit numbers
    G = torch.randn(n, d, generator=torch.Generator().manual_seed(0)) * 0.1
    opt = DistributedLion([x], Communicator.local(n), lr=1e-3, **kwargs)
    for t in range(1, steps + 1):
        opt.step(lambda xs: [G])
        s = opt.comm_stats()
        assert (s["uplink_bits"], s["downlink_bits"]) == (t * up, t * down)
        assert s["uplink_bits_max"] == t * up and opt.bits_sent == t * up
    if kwargs["compression"] != "none":
        assert 32 * d / (s["uplink_bits"] / steps) == pytest.approx(32 * d / up)


@pytest.mark.parametrize(("compression", "per_step"), [("none", 16 * 8 + 32 * 8), ("unbiased_sign", 16 + 32)])
def test_mixed_dtype_params_are_counted_at_their_own_width(compression: str, per_step: int) -> None:
    """bfloat16 + float32 parameters: 16 and 32 bits per coordinate (torch.cat would promote to 32)."""
    a, b = torch.zeros(8, dtype=torch.bfloat16), torch.zeros(8)
    gen = torch.Generator().manual_seed(0)
    G = [torch.randn(2, 8, generator=gen).to(torch.bfloat16), torch.randn(2, 8, generator=gen)]
    opt = DistributedLion([a, b], Communicator.local(2), lr=1e-2, compression=compression)
    for t in (1, 2):
        opt.step(lambda xs: G)
        assert opt.comm_stats()["uplink_bits"] == t * per_step
    assert a.dtype == torch.bfloat16 and b.dtype == torch.float32


_G3 = torch.tensor(
    [
        [1.0, -1.0, 2.0, -3.0, 0.5, -0.5],
        [1.0, -2.0, -2.0, 3.0, 0.5, 0.5],
        [-1.0, -1.0, 2.0, -3.0, -0.5, 0.5],
    ],
    dtype=torch.float64,
)


@pytest.mark.parametrize("compression", ["sign", "unbiased_sign"])
def test_majority_vote_of_three_clients_by_hand(compression: str) -> None:
    """beta1 = 0 so c_i = g_i; deterministic client signs (|c| = R for S_R); v = the majority sign."""
    G = _G3 if compression == "sign" else 3.0 * _G3.sign()  # |c_ij| = R = 3: S_R(c) = sign(c) surely
    kw = {"radius": 3.0} if compression == "unbiased_sign" else {}
    x = torch.ones(6, dtype=torch.float64)
    opt = DistributedLion(
        [x], Communicator.local(3), lr=0.1, betas=(0.0, 0.5), weight_decay=0.5, compression=compression, **kw
    )
    opt.step(lambda xs: [G])
    majority = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, 1.0], dtype=torch.float64)  # counted by hand
    expected = torch.ones(6, dtype=torch.float64) * (1 - 0.1 * 0.5) - 0.1 * majority
    torch.testing.assert_close(x, expected, rtol=0, atol=1e-15)


def test_majority_vote_ties_are_a_fair_coin() -> None:
    """4 clients, 2 vs 2 on every coordinate: each tie is +1 with probability 1/2, fresh every step."""
    d = 20_000
    G = torch.cat([torch.ones(2, d), -torch.ones(2, d)]).double()
    x = torch.zeros(d, dtype=torch.float64)
    opt = DistributedLion([x], Communicator.local(4), lr=1.0, betas=(0.0, 0.5), compression="sign", seed=7)
    opt.step(lambda xs: [G])
    v1 = -x.clone()
    assert bool(((v1 == 1) | (v1 == -1)).all())
    frac = float((v1 == 1).double().mean())
    assert abs(frac - 0.5) <= 4 * 0.5 / d**0.5  # binomial(d, 1/2): 4 SE
    opt.step(lambda xs: [G])
    v2 = -x - v1
    agree = float((v1 == v2).double().mean())
    assert abs(agree - 0.5) <= 4 * 0.5 / d**0.5  # independent coins from step to step


def test_adaptive_radius_is_the_largest_client_sup_norm(monkeypatch: pytest.MonkeyPatch) -> None:
    """R_t = max_i ||c_i||_inf, with c_i = beta1 m_i + (1 - beta1) g_i computed by hand over two steps."""
    lion_mod = sys.modules["optarium.distributed.lion"]
    seen: list[torch.Tensor] = []
    draw = lion_mod._sign_draw

    def spy(v: torch.Tensor, r: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        seen.append(torch.as_tensor(r).clone())
        return draw(v, r, u)

    monkeypatch.setattr(lion_mod, "_sign_draw", spy)
    gen = torch.Generator().manual_seed(1)
    G1, G2 = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen) * 4
    b1, b2 = 0.9, 0.99
    x = torch.zeros(5)
    opt = DistributedLion([x], Communicator.local(3), lr=1e-2, betas=(b1, b2), compression="unbiased_sign")
    opt.step(lambda xs: [G1])
    opt.step(lambda xs: [G2])
    c1 = (1 - b1) * G1.double()
    c2 = b1 * (1 - b2) * G1.double() + (1 - b1) * G2.double()
    for r, c in zip(seen, (c1, c2), strict=True):
        assert r.shape == (1,) or r.numel() == 1
        assert float(r) == pytest.approx(float(c.abs().amax(1).max()), rel=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "late"),
    [
        ({"compression": "unbiased_sign"}, r"^R \(the adaptive radius"),
        ({"compression": "unbiased_sign", "radius": 1.0}, r"^c:"),
        ({"compression": "sign"}, r"^c:"),
    ],
)
def test_non_finite_values_raise_instead_of_becoming_signs(kwargs: dict, late: str) -> None:
    G = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = torch.zeros(4, dtype=torch.float64)
    opt = DistributedLion([x], Communicator.local(3), lr=1e-2, **kwargs)
    for bad in (torch.nan, torch.inf):
        Gb = G.clone()
        Gb[1, 2] = bad
        with pytest.raises(NonFiniteGradientError, match=r"^grad_fn:"):
            opt.step(lambda xs, Gb=Gb: [Gb])
        assert torch.equal(x, torch.zeros(4, dtype=torch.float64)) and not opt.state  # nothing touched
    opt.step(lambda xs: [G])
    x_ok = x.clone()
    opt.state[x]["exp_avg"][0, 1] = torch.inf  # finite gradients, but c_0 overflows
    with pytest.raises(NonFiniteGradientError, match=late):
        opt.step(lambda xs: [G])
    assert torch.equal(x, x_ok)


def test_state_dict_round_trip_resumes_identically() -> None:
    prob = _prob()
    n, steps = 3, 12
    batches = _batches(n, 2 * steps)
    kw = {"lr": 1e-2, "compression": "unbiased_sign", "variance_reduction": True, "seed": 4}
    x = torch.zeros(D, dtype=torch.float64)
    opt = DistributedLion([x], Communicator.local(n), **kw)
    _run_dist(opt, prob, batches[:steps], steps)
    state, x_mid = copy.deepcopy(opt.state_dict()), x.clone()
    full = _run_dist(opt, prob, batches[steps:], steps)[-1]
    y = x_mid.clone()
    opt2 = DistributedLion([y], Communicator.local(n), **kw)
    opt2.load_state_dict(state)
    assert torch.equal(_run_dist(opt2, prob, batches[steps:], steps)[-1], full)


def test_bad_arguments_raise() -> None:
    x = torch.zeros(3)
    for kwargs, name in [
        ({"lr": 0.0}, "lr"),
        ({"betas": (1.0, 0.9)}, "betas"),
        ({"weight_decay": -1.0}, "weight_decay"),
        ({"compression": "topk"}, "compression"),
        ({"server_rule": "mean"}, "server_rule"),
        ({"radius": 1.0}, "radius"),
        ({"compression": "unbiased_sign", "radius": -1.0}, "radius"),
        ({"server_rank": 1}, "server_rank"),
    ]:
        with pytest.raises(ValueError, match=rf"^{name}"):
            DistributedLion([x], **kwargs)
    with pytest.raises(TypeError, match=r"^comm:"):
        DistributedLion([x], comm=3)
    opt = DistributedLion([x], Communicator.local(2))
    with pytest.raises(ValueError, match=r"^grad_fn:"):
        opt.step(lambda xs: [torch.zeros(3)])
