"""Tests of the landing-based constrained diffusion samplers (spec constrained-diffusion-landing.md)."""

from __future__ import annotations

import math
import pickle

import pytest
import torch

from optarium.generative.landing import (
    Constraints,
    LandingDiffusion,
    NoiseSchedule,
    PeakTensorMemory,
    latlon_jsd,
    mlp,
    sphere_constraints,
    sphere_uniform,
    tetrahedron,
    vmf_mixture,
    vmf_sample,
)

D64 = torch.float64


def _sphere_points(n: int, seed: int) -> torch.Tensor:
    x = torch.randn(n, 3, dtype=D64, generator=torch.Generator().manual_seed(seed))
    return x / x.norm(dim=-1, keepdim=True)


def _torus(rho: float = 0.3) -> Constraints:
    c = torch.tensor([1.0, 0.0, 0.4], dtype=D64)

    def h(x: torch.Tensor) -> torch.Tensor:
        return ((torch.sqrt(x[..., 0] ** 2 + x[..., 1] ** 2) - 1.0) ** 2 + x[..., 2] ** 2 - 0.16).unsqueeze(
            -1
        )

    def g(x: torch.Tensor) -> torch.Tensor:
        return (rho**2 - ((x - c.to(x.dtype)) ** 2).sum(-1)).unsqueeze(-1)

    return Constraints(3, h=h, g=g)


@pytest.mark.parametrize("reg", [1e-6, 0.0])
def test_tangent_projection_algebra(reg: float) -> None:
    C = _torus()
    x = _sphere_points(50, 0) * 1.2
    v = torch.randn(50, 3, dtype=D64, generator=torch.Generator().manual_seed(1))
    C.reg = reg
    c, J = C.jacobian(x)
    J = J * C.active(c).unsqueeze(-1)
    Pv = C.tangent(x, v)
    lam_min = torch.linalg.eigvalsh(J @ J.transpose(-1, -2)).clamp_min(1e-12)
    lam_min = torch.where(J.abs().sum((-1, -2)) > 0, lam_min.min(-1).values, torch.ones(50, dtype=D64))
    tol = (1e-5 * v.norm(dim=-1) / lam_min) if reg > 0 else torch.full((50,), 1e-12)
    assert ((J @ Pv.unsqueeze(-1)).squeeze(-1).abs().amax(-1) <= tol).all()
    assert torch.allclose(C.tangent(x, Pv), Pv, atol=1e-5 if reg else 1e-12)  # idempotent
    w = torch.randn(50, 3, dtype=D64, generator=torch.Generator().manual_seed(2))
    assert torch.allclose(
        (C.tangent(x, v) * w).sum(-1), (v * C.tangent(x, w)).sum(-1), atol=1e-10
    )  # symmetric


@pytest.mark.parametrize("reg", [1e-6, 0.0])
def test_implicit_landing_is_quadratic(reg: float) -> None:
    C = _torus(rho=0.05)
    C.reg = reg
    base = torch.tensor([[2.0, 0.0, 0.0]]) * torch.tensor([[0.7]])  # on the torus: sqrt(x1^2+x2^2) = 1.4
    n = torch.tensor([[1.0, 0.0, 0.0]], dtype=D64)
    for eps in [1e-1, 1e-2, 1e-3, 1e-4]:
        y = base.to(D64) + eps * n
        h0 = C.values(y)[0].abs().item()
        x1 = y - C.landing_direction(y, 0.1)
        h1 = C.values(x1)[0].abs().item()
        assert h1 <= 5.0 * h0**2 + (0.0 if reg == 0 else 2e-6 * h0), (eps, h0, h1)


def test_explicit_landing_contraction_on_the_sphere() -> None:
    C = sphere_constraints()
    x = _sphere_points(5, 3) * (1 + 0.2)
    model = LandingDiffusion(C, NoiseSchedule(1.0, 1.0, 0.005, 1), "OLLA", alpha=100.0, landing="explicit")
    c = model.alpha * 1.0 * model.sched.dt
    assert c == pytest.approx(0.5)
    h = C.values(x)[0]
    zero = torch.zeros_like(x)
    stats = {"newton_iters": 0.0, "nfe": 0.0}
    for _ in range(12):
        x, _ = model.correct(x, zero, c, stats)
        h_new = C.values(x)[0]
        assert torch.allclose(h_new, h * (1 - c / (1 + 1e-6)), rtol=1e-9, atol=0)
        h = h_new
    x2, _ = model.correct(_sphere_points(5, 3) * 1.2, zero, 2.0, stats)
    assert torch.allclose(
        C.values(x2)[0], -torch.full((5, 1), 0.2, dtype=D64), rtol=1e-5
    )  # sign flip, no contraction
    with pytest.raises(ValueError, match=r"^alpha"):
        LandingDiffusion(C, NoiseSchedule(0.01, 1.0, 4.0, 100), "OLLA", alpha=50.0, landing="explicit")


def test_inequalities_inactive_and_repulsion() -> None:
    C = _torus(rho=0.3)
    far = torch.tensor([[-1.4, 0.0, 0.0]], dtype=D64)  # far from the ball: g inactive
    only_h = Constraints(3, h=C.h)
    assert torch.allclose(C.landing_direction(far, 0.1), only_h.landing_direction(far, 0.1), atol=0, rtol=0)
    v = torch.tensor([[0.1, 0.3, -0.2]], dtype=D64)
    assert torch.allclose(C.tangent(far, v), only_h.tangent(far, v))
    inside = torch.tensor([[1.1, 0.1, 0.35]], dtype=D64)  # inside the excluded ball: g > 0
    assert C.values(inside)[1].item() > 0
    y = inside - C.landing_direction(inside, 0.1)
    assert C.values(y)[1].item() < 0


def test_generic_class_matches_closed_form_sphere() -> None:
    C = sphere_constraints(reg=0.0)
    x = _sphere_points(100, 4)
    z = torch.randn(100, 3, dtype=D64, generator=torch.Generator().manual_seed(5)) * 0.1
    step = C.tangent(x, z)
    closed_step = z - (z * x).sum(-1, keepdim=True) * x
    assert torch.allclose(step, closed_step, atol=1e-12)
    y = x + step
    landed = y - C.landing_direction(y, 0.1)
    proj, ok, _ = C.project(y)
    closed = y / y.norm(dim=-1, keepdim=True)
    assert torch.allclose(landed, closed, atol=1e-5) and torch.allclose(proj, closed, atol=1e-5) and ok.all()


@pytest.mark.parametrize("sampler", ["OLLA", "ULLA"])
def test_uniform_stays_uniform_with_zero_drift(sampler: str) -> None:
    n = 3000
    x0 = _sphere_points(n, 6)
    sched = NoiseSchedule(0.1, 2.0, 2.0, 25) if sampler == "ULLA" else NoiseSchedule(0.01, 1.0, 4.0, 25)
    res = LandingDiffusion(sphere_constraints(), sched, sampler).sample(
        prior=x0, generator=torch.Generator().manual_seed(7)
    )
    x = res.x
    se = 1.0 / math.sqrt(3 * n)
    assert (x.mean(0).abs() < 4 * se).all()
    second = x.T @ x / n
    se2 = math.sqrt(4 / 45 / n)  # sd of x_i^2 on S^2 is sqrt(4/45); of x_i x_j is sqrt(1/15)
    assert ((second - torch.eye(3, dtype=D64) / 3).abs() < 4 * max(se2, math.sqrt(1 / 15 / n))).all()


@pytest.mark.parametrize("sampler", ["OLLA", "OLLA-P", "ULLA", "ULLA-P"])
def test_outputs_feasible_or_dropped(sampler: str) -> None:
    C = _torus()
    x0 = torch.tensor([[1.0, 0.0, -0.4]], dtype=D64).repeat(200, 1)
    sched = NoiseSchedule(0.4, 0.4, 1.0, 20)
    res = LandingDiffusion(C, sched, sampler, gamma=2.0).sample(
        prior=x0, generator=torch.Generator().manual_seed(8), reverse=False
    )
    h, g = C.values(res.x)
    assert res.x.shape[0] + res.extras["dropped"] == 200
    assert (h.abs() <= 1e-5).all() and (g <= 1e-5).all()
    if sampler.endswith("-P"):
        assert res.extras["newton_iters"] >= 200  # Newton iterations at every step
    else:
        assert res.extras["jacobian_evals"] >= 20 * 200  # one landing step per step and particle


def test_loss_sanity_and_unbiased_subsample() -> None:
    torch.manual_seed(0)
    C = sphere_constraints()
    centre = torch.tensor([0.0, 0.0, 1.0], dtype=D64)
    data = _sphere_points(256, 9) * 0.15 + centre
    data = data / data.norm(dim=-1, keepdim=True)
    model = LandingDiffusion(C, NoiseSchedule(0.05, 1.0, 1.0, 10), "OLLA", hidden=(32, 32))
    g = torch.Generator().manual_seed(10)
    res = model.fit(data, iters=40, batch_size=128, lr=5e-3, ema=0.9, generator=g, record_every=10)
    paths = model.forward_paths(data, torch.Generator().manual_seed(11))
    trained = model.path_loss(paths).item()
    fresh = (
        LandingDiffusion(C, model.sched, "OLLA", net=mlp([4, 32, 32, 3], dtype=D64)).path_loss(paths).item()
    )
    assert math.isfinite(res.value) and trained < fresh
    loss = model.path_loss(paths[:, :32])
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.net.parameters())
    full = model.path_loss(paths[:, :64]).item()
    gs = torch.Generator().manual_seed(12)
    draws = torch.tensor(
        [model.path_loss(paths[:, :64], time_subsample=3, generator=gs).item() for _ in range(100)]
    )
    assert abs(draws.mean().item() - full) < 4 * draws.std().item() / math.sqrt(100)
    pickle.loads(pickle.dumps(res))


def test_ulla_high_friction_matches_time_rescaled_olla() -> None:
    # gamma sigma^2 dt = 0.1; horizon 2 T / gamma = 0.5 (the spec uses gamma = 20, N = 1000; scaled for speed)
    x0 = torch.zeros(2000, 3, dtype=D64)
    x0[:, 2] = 1.0
    olla = LandingDiffusion(sphere_constraints(), NoiseSchedule(1.0, 1.0, 0.5, 100), "OLLA")
    ulla = LandingDiffusion(sphere_constraints(), NoiseSchedule(1.0, 1.0, 2.5, 250), "ULLA", gamma=10.0)
    zo = olla.sample(prior=x0, generator=torch.Generator().manual_seed(13), reverse=False).x[:, 2].mean()
    zu = ulla.sample(prior=x0, generator=torch.Generator().manual_seed(14), reverse=False).x[:, 2].mean()
    assert abs(zo.item() - math.exp(-0.5)) < 0.03 and abs(zu.item() - math.exp(-0.5)) < 0.03


def test_determinism_under_a_seed() -> None:
    model = LandingDiffusion(_torus(), NoiseSchedule(0.4, 0.4, 1.0, 10), "ULLA")
    x0 = torch.tensor([[1.0, 0.0, -0.4]], dtype=D64).repeat(50, 1)
    a = model.sample(prior=x0, generator=torch.Generator().manual_seed(1), reverse=False).x
    b = model.sample(prior=x0, generator=torch.Generator().manual_seed(1), reverse=False).x
    c = model.sample(prior=x0, generator=torch.Generator().manual_seed(2), reverse=False).x
    assert torch.equal(a, b) and not torch.equal(a, c)
    f32 = model.sample(prior=x0.float(), generator=torch.Generator().manual_seed(1), reverse=False).x
    assert f32.dtype == torch.float32


def test_bad_input_and_rank_deficiency() -> None:
    C = sphere_constraints()
    s = NoiseSchedule()
    for kw, name in [({"alpha": 0.0}, "alpha"), ({"gamma": -1.0}, "gamma"), ({"sampler": "X"}, "sampler")]:
        with pytest.raises(ValueError, match=f"^{name}"):
            LandingDiffusion(C, s, **kw)
    with pytest.raises(ValueError, match=r"^N"):
        NoiseSchedule(N=0)
    with pytest.raises(ValueError, match=r"^h"):
        Constraints(3, h=lambda x: x.norm(dim=-1))  # (n,) instead of (n, 1)
    with pytest.raises(ValueError, match=r"^g"):
        Constraints(3, g=lambda x: x.sum())
    with pytest.raises(ValueError, match=r"^prior"):
        LandingDiffusion(C, s).sample(prior=torch.zeros(4, 2))
    # two identical constraints: a rank-deficient J, handled without NaNs
    dup = Constraints(3, h=lambda x: torch.cat([x.norm(dim=-1, keepdim=True) - 1] * 2, dim=-1))
    x = _sphere_points(10, 0) * 1.1
    assert torch.isfinite(dup.tangent(x, x)).all() and torch.isfinite(dup.landing_direction(x, 0.1)).all()
    y, ok, _ = dup.project(x)
    assert ok.all() and torch.allclose(y.norm(dim=-1), torch.ones(10, dtype=D64), atol=1e-6)


def test_vmf_mean_resultant_length_and_mixture() -> None:
    kappa, n = 50.0, 20_000
    g = torch.Generator().manual_seed(20)
    mu = torch.tensor([[0.6, 0.0, 0.8]], dtype=D64).repeat(n, 1)
    x = vmf_sample(mu, kappa, generator=g)
    assert torch.allclose(x.norm(dim=-1), torch.ones(n, dtype=D64), atol=1e-12)
    w = (x * mu).sum(-1)
    expected = 1.0 / math.tanh(kappa) - 1.0 / kappa
    assert abs(w.mean().item() - expected) < 4 * w.std().item() / math.sqrt(n)
    # the azimuth is uniform: the tangential component has mean zero
    tang = x - w.unsqueeze(-1) * mu
    assert (tang.mean(0).abs() < 4 * tang.std(0) / math.sqrt(n)).all()
    # a tetrahedron mixture has (near) zero first moment, a single vMF does not
    mix = vmf_mixture(tetrahedron(), kappa, n, generator=g)
    assert mix.mean(0).norm().item() < 0.03 and x.mean(0).norm().item() > 0.9
    with pytest.raises(ValueError, match=r"^mu"):
        vmf_sample(torch.ones(3, 3, dtype=D64), kappa)
    with pytest.raises(ValueError, match=r"^kappa"):
        vmf_sample(mu[:2], 0.0)


def test_latlon_jsd_identical_small_disjoint_large() -> None:
    g = torch.Generator().manual_seed(21)
    a = vmf_mixture(tetrahedron(), 50.0, 5000, generator=g)
    b = vmf_mixture(tetrahedron(), 50.0, 5000, generator=g)
    assert latlon_jsd(a, a) == pytest.approx(0.0, abs=1e-12)
    same_law = latlon_jsd(a, b)
    assert 0.0 < same_law < 0.02  # sampling noise only (36 x 18 bins, 5000 vs 5000)
    north = vmf_sample(torch.tensor([[0.0, 0.0, 1.0]], dtype=D64).repeat(2000, 1), 50.0, generator=g)
    assert latlon_jsd(north, -north) == pytest.approx(math.log(2.0), rel=1e-9)  # disjoint supports: ln 2
    assert latlon_jsd(sphere_uniform(5000, generator=g), a) > 0.3
    with pytest.raises(ValueError, match="x, y"):
        latlon_jsd(torch.zeros(4, 2), a)


def test_peak_tensor_memory_measures_and_grows_with_particles() -> None:
    with PeakTensorMemory() as pm:
        x = torch.zeros(1000, 100, dtype=D64)  # 800 kB
        del x
        y = torch.zeros(10, dtype=D64)
    assert pm.peak_bytes == 800_000 and pm.current == y.numel() * 8
    model = LandingDiffusion(_torus(), NoiseSchedule(0.4, 0.4, 0.5, 3), "OLLA-P")
    model.net = mlp([4, 16, 3], dtype=D64)
    peaks = []
    for n in (50, 200):
        prior = torch.tensor([[1.0, 0.0, -0.4]], dtype=D64).repeat(n, 1)
        with PeakTensorMemory() as pm:
            model.sample(prior=prior, generator=torch.Generator().manual_seed(0))
        peaks.append(pm.peak_bytes)
    assert 0 < peaks[0] and 3.0 < peaks[1] / peaks[0] < 5.0  # ~linear in the particle count
    # backward passes are seen too
    net = mlp([4, 64, 3], dtype=D64)
    inp = torch.randn(500, 4, dtype=D64)
    with PeakTensorMemory() as fwd:
        net(inp).sum()
    with PeakTensorMemory() as both:
        net(inp).sum().backward()
    assert both.peak_bytes > fwd.peak_bytes >= 500 * 64 * 8


@pytest.mark.parametrize("sampler", ["OLLA", "ULLA"])
def test_trained_net_path_at_smoke_size(sampler: str) -> None:
    """fit on vMF data, then sample with the landing and the -P sampler on the same net: on S^2 one
    Gauss-Newton step of ||x|| - 1 is exact normalisation, so the two agree (common random numbers)."""
    g = torch.Generator().manual_seed(30)
    data = vmf_mixture(tetrahedron(), 50.0, 128, generator=g)
    sched = NoiseSchedule(0.01, 1.0, 4.0, 10) if sampler == "OLLA" else NoiseSchedule(0.1, 2.0, 2.0, 5)
    torch.manual_seed(31)
    net = mlp([7 if sampler == "ULLA" else 4, 16, 3], dtype=torch.float32)
    model = LandingDiffusion(sphere_constraints(), sched, sampler, net=net)
    fit = model.fit(data, iters=5, batch_size=32, ema=0.9, time_subsample=3, generator=g, record_every=1)
    assert all(math.isfinite(r["loss"]) for r in fit.history.as_rows())
    assert fit.extras["path_bytes"] == (sched.N + 1) * 128 * 3 * 8
    prior = sphere_uniform(200, generator=g)
    out = {}
    for smp in (sampler, sampler + "-P"):
        m = LandingDiffusion(sphere_constraints(), sched, smp, net=model.net)
        m.ema = model.ema
        res = m.sample(prior=prior, generator=torch.Generator().manual_seed(32))
        assert res.extras["dropped"] == 0 and res.value <= 1e-5
        assert res.extras["nfe"] == 200 * sched.N
        out[smp] = res
    assert torch.allclose(out[sampler].x, out[sampler + "-P"].x, atol=1e-4)
    assert out[sampler + "-P"].extras["newton_iters"] > 0 == out[sampler].extras["newton_iters"]
