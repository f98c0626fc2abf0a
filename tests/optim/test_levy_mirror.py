"""Stochastic mirror descent, the Lévy mirror flow and MirrorDescent (the levy-mirror spec's tests 1-8)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from optarium.optim import NonFiniteGradientError
from optarium.optim.levy_mirror import (
    Entropic,
    Euclidean,
    MirrorDescent,
    bootstrap_slopes,
    hill_estimator,
    levy_mirror_flow,
    log_log_slope,
    make_mirror,
    median,
    mirror_descent,
    power_step,
    project_simplex,
    simplex_least_squares,
    strongly_convex_step,
    trimmed_mean,
)
from optarium.problems.heavy_tail import AlphaStableNoise

D64 = torch.float64


def _simplex_points(n: int, d: int, seed: int) -> torch.Tensor:
    e = torch.empty(n, d, dtype=D64).exponential_(generator=torch.Generator().manual_seed(seed))
    return e / e.sum(-1, keepdim=True)


@pytest.fixture(scope="module")
def quick_problem() -> dict[str, torch.Tensor]:
    return simplex_least_squares(0)


# ------------------------------------------------------------------------------------ 1. mirror maps
def test_entropic_map_is_a_stable_softmax_and_inverts_grad_h() -> None:
    ent = Entropic()
    y = torch.tensor([[1e8, -1e8, 0.0, 1e8 - 1.0]], dtype=D64)
    x = ent.project(y)
    e = math.exp(-1.0)
    torch.testing.assert_close(x, torch.tensor([[1 / (1 + e), 0.0, 0.0, e / (1 + e)]], dtype=D64))
    assert bool(torch.isfinite(ent.state_from_dual(y)[..., [0, 3]]).all())
    pts = _simplex_points(5, 7, 0)
    torch.testing.assert_close(ent.project(ent.dual(pts)), pts, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(ent.project(ent.dual(pts) + 3.0), pts, rtol=1e-14, atol=1e-15)  # h + const
    # KL as the Bregman divergence of the negative entropy
    z = _simplex_points(5, 7, 1)
    kl = (pts * (pts / z).log()).sum(-1)
    breg = ent.h(pts) - ent.h(z) - ((1 + ent.dual(z)) * (pts - z)).sum(-1)
    torch.testing.assert_close(ent.bregman(pts, z), kl)
    torch.testing.assert_close(breg, kl)


def test_euclidean_maps_project_onto_ball_and_box_and_invert_interior_points() -> None:
    ball, box = Euclidean(radius=2.0), Euclidean(box=(-1.0, 0.5))
    y = torch.tensor([[3.0, 4.0], [0.3, -0.4]], dtype=D64)
    torch.testing.assert_close(ball.project(y), torch.tensor([[1.2, 1.6], [0.3, -0.4]], dtype=D64))
    torch.testing.assert_close(box.project(y), torch.tensor([[0.5, 0.5], [0.3, -0.4]], dtype=D64))
    inner = torch.tensor([[0.3, -0.4]], dtype=D64)
    for m in (ball, box, Euclidean()):
        torch.testing.assert_close(m.project(m.dual(inner)), inner)
    assert make_mirror(None) == Euclidean() and isinstance(make_mirror("entropic"), Entropic)


def test_project_simplex_is_the_euclidean_projection() -> None:
    torch.testing.assert_close(project_simplex(torch.tensor([0.5, 0.5, 0.5], dtype=D64)),
                               torch.full((3,), 1 / 3, dtype=D64))  # fmt: skip
    torch.testing.assert_close(project_simplex(torch.tensor([2.0, 0.0, -1.0], dtype=D64)),
                               torch.tensor([1.0, 0.0, 0.0], dtype=D64))  # fmt: skip
    x = torch.randn(200, 6, generator=torch.Generator().manual_seed(0), dtype=D64) * 3
    p = project_simplex(x)
    assert bool((p >= 0).all()) and float((p.sum(-1) - 1).abs().max()) < 1e-12
    # optimality: <x - p, z - p> <= 0 for every vertex z of the simplex
    vertices = torch.eye(6, dtype=D64)
    inner = ((x - p).unsqueeze(1) * (vertices.unsqueeze(0) - p.unsqueeze(1))).sum(-1)
    assert float(inner.max()) <= 1e-12


# --------------------------------------------------------------------------- 2. feasibility under huge noise
@pytest.mark.parametrize("variant", ["lazy", "greedy"])
def test_iterates_stay_on_the_simplex_after_huge_noise(variant: str) -> None:
    x0 = torch.full((10,), 0.1, dtype=D64)
    c = torch.linspace(-1, 1, 10, dtype=D64)
    res = mirror_descent(lambda x: x @ c, x0, 300, grad=lambda x: c.expand_as(x), mirror="entropic",
                         variant=variant, step=power_step(1.0, 1.05), noise=AlphaStableNoise(1.05, 1e4),
                         n_seeds=40, snapshots=(100, 300), seed=3)  # fmt: skip
    for x in (res.x, res.extras["iterates"], res.extras["ergodic"]):
        assert bool(torch.isfinite(x).all()) and bool((x >= 0).all())
        assert float((x.sum(-1) - 1).abs().max()) <= 1e-12
    # draws that large do occur: some coordinate of some row underflowed to an exact 0 at some point
    assert float(res.x.min()) < 1e-300 or float(res.extras["iterates"].min()) < 1e-300


# ------------------------------------------------------------------------------- 3. zero noise converges
def test_zero_noise_mirror_descent_converges_on_the_quick_problem(quick_problem: dict) -> None:
    a, b, q, c = quick_problem["A"], quick_problem["b"], quick_problem["Q"], quick_problem["c"]
    f_star = float(quick_problem["f_star"])
    res = mirror_descent(lambda x: 0.5 * ((x @ a.T - b) ** 2).sum(-1) - f_star, torch.full((20,), 0.05,
                         dtype=D64), 20_000, grad=lambda x: x @ q - c, mirror="entropic", variant="lazy",
                         step=0.1, tol=1e-6)  # fmt: skip
    # x* has one coordinate on the boundary (19 of 20 positive), which entropic steps approach sublinearly
    assert res.status == "converged" and res.value <= 1e-6, (res.status, res.value)
    assert float((res.x - quick_problem["x_star"]).abs().max()) < 1e-2


# ------------------------------------------------------------------------- 4. Gaussian noise: the T^-1/2 rate
def test_gaussian_noise_rate_on_the_quick_problem(quick_problem: dict) -> None:
    a, b, q, c = quick_problem["A"], quick_problem["b"], quick_problem["Q"], quick_problem["c"]
    f_star = float(quick_problem["f_star"])
    ts = (100, 1000, 10_000)
    res = mirror_descent(lambda x: 0.5 * ((x @ a.T - b) ** 2).sum(-1), torch.full((20,), 0.05, dtype=D64),
                         ts[-1], grad=lambda x: x @ q - c, mirror="entropic", variant="lazy",
                         step=power_step(0.3, 2.0), noise=AlphaStableNoise(2.0), n_seeds=20, snapshots=ts,
                         seed=11, record_every=ts[-1])  # fmt: skip
    err = 0.5 * ((res.extras["ergodic"] @ a.T - b) ** 2).sum(-1) - f_star  # [3, 20]
    med = median(err, -1)
    assert bool((med[1:] < med[:-1]).all()), med
    assert float(log_log_slope(ts, med)) <= -0.4


# ----------------------------------------------------------------------------------- 6. ergodic average
def test_ergodic_average_uses_the_step_sizes_as_weights() -> None:
    x0 = torch.tensor([1.0, -2.0], dtype=D64)
    gammas = [0.5, 0.25, 0.125]
    res = mirror_descent(lambda x: 0.5 * x.square().sum(-1), x0, 3, grad=lambda x: x,
                         step=lambda t: gammas[t - 1], snapshots=(1, 2, 3))  # fmt: skip
    xs = [x0, 0.5 * x0, 0.375 * x0]  # x_{t+1} = (1 - gamma_t) x_t
    for k in range(3):
        w = gammas[: k + 1]
        expected = sum(g * x for g, x in zip(w, xs, strict=False)) / sum(w)
        torch.testing.assert_close(res.extras["ergodic"][k, 0], expected, rtol=1e-15, atol=0)
    torch.testing.assert_close(res.x[0], 0.375 * 0.875 * x0, rtol=1e-15, atol=0)
    assert float(res.extras["weight_sum"]) == 0.875


# ------------------------------------------------------------------------------ 7. LMF mean dynamics
def test_lmf_dual_mean_drifts_by_minus_c_t_under_brownian_noise() -> None:
    c = torch.tensor([1.0, 0.5, -0.5], dtype=D64)
    x0 = torch.tensor([0.2, 0.3, 0.5], dtype=D64)
    horizon, n = 2.0, 20_000
    # the Euler drift is exact for a constant gradient, so a coarse h tests the same identity
    res = levy_mirror_flow(lambda x: x @ c, x0, horizon, h=0.05, alpha=2.0, mirror="entropic", n_paths=n,
                           grad=lambda x: c.expand_as(x), seed=5)  # fmt: skip
    y = res.extras["y"]
    se = y.std(0) / math.sqrt(n)
    torch.testing.assert_close(se, torch.full((3,), math.sqrt(2 * horizon / n), dtype=D64), rtol=0.05, atol=0)
    assert bool(((y.mean(0) - (x0.log() - c * horizon)).abs() <= 4 * se).all())
    x = res.x
    assert bool((x >= 0).all()) and float((x.sum(-1) - 1).abs().max()) < 1e-12


def test_lmf_euclidean_mean_follows_the_noise_free_euler_recursion() -> None:
    hdiag = torch.tensor([1.0, 3.0], dtype=D64)
    x0 = torch.tensor([1.0, -1.0], dtype=D64)
    h, horizon, n = 2e-2, 1.0, 10_000
    res = levy_mirror_flow(lambda x: 0.5 * (hdiag * x * x).sum(-1), x0, horizon, h=h, alpha=2.0,
                           scale=0.5, n_paths=n, grad=lambda x: hdiag * x, seed=6)  # fmt: skip
    mean = x0 * (1 - h * hdiag) ** res.extras["n_steps"]
    se = res.x.std(0) / math.sqrt(n)
    assert bool(((res.x.mean(0) - mean).abs() <= 4 * se).all())


def test_lmf_hitting_times_and_jumps() -> None:
    c = torch.tensor([0.0, 1.0], dtype=D64)
    res = levy_mirror_flow(lambda x: x @ c, torch.tensor([0.5, 0.5], dtype=D64), 5.0, h=1e-2, alpha=1.3,
                           scale=0.01, mirror="entropic", n_paths=30, grad=lambda x: c.expand_as(x),
                           targets=[0.1, 1e-30], record_paths=2, seed=0)  # fmt: skip
    hits = res.extras["hit_times"]
    # noise-free flow: x_2(t) = 1 / (1 + e^t) <= 0.1 once t >= log 9 = 2.197
    assert float(hits[0].median()) == pytest.approx(math.log(9), abs=0.05)
    assert bool(torch.isinf(hits[1]).all())
    assert res.extras["paths"].shape == (len(res.extras["times"]), 2, 2)


# ----------------------------------------------------------------------------------------- robust statistics
def test_robust_statistics() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0, 100.0, 5.0, 6.0, 7.0, 8.0, math.inf]], dtype=D64)
    assert float(median(x)) == 5.5
    assert float(trimmed_mean(x, 0.1)) == pytest.approx((2 + 3 + 4 + 5 + 6 + 7 + 8 + 100) / 8)
    ts = [10.0, 100.0, 1000.0]
    assert float(log_log_slope(ts, torch.tensor([3.0, 0.3, 0.03]))) == pytest.approx(-1.0)
    g = torch.Generator().manual_seed(0)
    noise = torch.exp(0.1 * torch.randn(2, 3, 400, generator=g, dtype=D64))
    errs = torch.tensor(ts, dtype=D64).view(1, 3, 1) ** torch.tensor([-0.5, -1.0], dtype=D64).view(2, 1, 1)
    slope, reps = bootstrap_slopes(errs * noise, ts, n_boot=100, generator=g)
    assert reps.shape == (100, 2)
    torch.testing.assert_close(slope, torch.tensor([-0.5, -1.0], dtype=D64), atol=0.02, rtol=0)
    assert bool((reps.std(0) > 0).all()) and bool((reps.std(0) < 0.02).all())
    # Hill on Pareto(1.5) tails: P(|X| > u) = u^-1.5
    u = torch.rand(200_000, generator=g, dtype=D64)
    assert hill_estimator(u.pow(-1 / 1.5), 2000) == pytest.approx(1.5, abs=0.1)


# ------------------------------------------------------------------------------------------ 8. bad input
def test_bad_input_raises_naming_the_argument() -> None:
    x0 = torch.full((3,), 1 / 3, dtype=D64)

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sum(-1)

    with pytest.raises(ValueError, match=r"^p\b"):
        power_step(0.1, 2.5)
    with pytest.raises(ValueError, match=r"^p\b"):
        power_step(0.1, 1.0)
    with pytest.raises(ValueError, match=r"^gamma0"):
        power_step(0.0, 1.5)
    with pytest.raises(ValueError, match=r"^mu"):
        strongly_convex_step(0.0)
    with pytest.raises(ValueError, match=r"^alpha"):
        AlphaStableNoise(2.5)
    with pytest.raises(ValueError, match=r"^alpha"):
        levy_mirror_flow(f, x0, 1.0, alpha=0.0)
    with pytest.raises(ValueError, match=r"^step"):
        mirror_descent(f, x0, 5, step=0.0)
    with pytest.raises(ValueError, match=r"^step"):
        mirror_descent(f, x0, 5, step=lambda t: -1.0)
    with pytest.raises(ValueError, match=r"^x0"):
        mirror_descent(f, torch.tensor([0.5, 0.6], dtype=D64), 5, mirror="entropic")
    with pytest.raises(ValueError, match=r"^x0"):
        mirror_descent(f, torch.tensor([3.0, 0.0], dtype=D64), 5, mirror=Euclidean(radius=1.0))
    with pytest.raises(ValueError, match=r"^grad_at"):
        mirror_descent(f, x0, 5, grad_at="state")
    with pytest.raises(ValueError, match=r"^radius"):
        Euclidean(radius=-1.0)
    with pytest.raises(ValueError, match=r"^box"):
        Euclidean(box=(1.0, 0.0))
    with pytest.raises(ValueError, match=r"^params"):
        MirrorDescent([torch.zeros(2, dtype=torch.complex128, requires_grad=True)], mirror="entropic")


# ------------------------------------------------------------------------------------------ MirrorDescent
def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("maximize", [False, True])
def test_euclidean_mirror_descent_is_sgd_bit_for_bit(foreach: bool, maximize: bool) -> None:
    a, b = _mlp(), _mlp()
    groups = lambda m: [{"params": m[0].parameters()}, {"params": m[2].parameters(), "lr": 3e-3}]  # noqa: E731
    opt_a = MirrorDescent(groups(a), lr=1e-2, maximize=maximize, foreach=foreach)
    opt_b = torch.optim.SGD(groups(b), lr=1e-2, maximize=maximize, foreach=foreach)
    gen = torch.Generator().manual_seed(1)
    for _ in range(10):
        x = torch.randn(16, 5, generator=gen, dtype=D64)
        for m, o in ((a, opt_a), (b, opt_b)):
            o.zero_grad()
            ((m(x) - x.sum(1, keepdim=True)) ** 2).mean().backward()
            o.step()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert len(opt_a.state) == 0


@pytest.mark.parametrize("variant", ["greedy", "lazy"])
def test_entropic_mirror_descent_stays_on_the_simplex_and_matches_the_closed_form(variant: str) -> None:
    w0 = _simplex_points(3, 6, 0)
    w = w0.clone().requires_grad_(True)
    opt = MirrorDescent([w], lr=0.3, mirror="entropic", variant=variant)
    gen = torch.Generator().manual_seed(2)
    expected = w0.clone()
    for k in range(40):
        g = torch.randn(3, 6, generator=gen, dtype=D64) * (1e6 if k == 20 else 1.0)
        w.grad = g.clone()
        opt.step()
        expected = torch.softmax(torch.log(expected) - 0.3 * g, -1)
        assert bool((w >= 0).all()) and float((w.detach().sum(-1) - 1).abs().max()) <= 1e-12
    torch.testing.assert_close(w.detach(), expected, rtol=1e-9, atol=1e-12)


def test_entropic_optimizer_converges_and_matches_the_simulator() -> None:
    c = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=D64)
    x = torch.full((4,), 0.25, dtype=D64, requires_grad=True)
    opt = MirrorDescent([x], lr=0.5, mirror="entropic", variant="lazy")
    for _ in range(200):
        opt.zero_grad()
        (0.5 * (x - c).square().sum()).backward()
        opt.step()
    sim = mirror_descent(lambda z: 0.5 * (z - c).square().sum(-1), torch.full((4,), 0.25, dtype=D64), 200,
                         grad=lambda z: z - c, mirror="entropic", variant="lazy", step=0.5)  # fmt: skip
    torch.testing.assert_close(x.detach(), sim.x[0], rtol=1e-12, atol=1e-14)
    assert float((x.detach() - c).abs().max()) < 1e-6


def test_ball_projected_mirror_descent_equals_clip_sgd_with_a_ball_projection() -> None:
    from optarium.optim import BallProjection, ClipSGD

    a = torch.tensor([2.0, -1.0, 0.5], dtype=D64, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    target = torch.tensor([3.0, 3.0, 3.0], dtype=D64)
    opt_a = MirrorDescent([a], lr=0.1, mirror=Euclidean(radius=1.5))
    opt_b = ClipSGD([b], lr=0.1, clip=math.inf, projection=BallProjection(1.5))
    for _ in range(20):
        for p, o in ((a, opt_a), (b, opt_b)):
            o.zero_grad()
            ((p - target) ** 2).sum().backward()
            o.step()
    torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-14, atol=1e-15)


def test_state_dict_round_trip_infeasible_policy_zero_lr_and_nonfinite() -> None:
    w = _simplex_points(2, 5, 3).requires_grad_(True)
    opt = MirrorDescent([w], lr=0.2, mirror="entropic", variant="lazy")
    gen = torch.Generator().manual_seed(4)
    grads = [torch.randn(2, 5, generator=gen, dtype=D64) for _ in range(6)]
    for g in grads[:3]:
        w.grad = g.clone()
        opt.step()
    saved_w, saved = w.detach().clone(), copy.deepcopy(opt.state_dict())
    assert "dual" in saved["state"][0]
    for g in grads[3:]:
        w.grad = g.clone()
        opt.step()
    w2 = saved_w.clone().requires_grad_(True)
    opt2 = MirrorDescent([w2], lr=1.0, mirror="entropic", variant="lazy")
    opt2.load_state_dict(saved)
    for g in grads[3:]:
        w2.grad = g.clone()
        opt2.step()
    assert torch.equal(w.detach(), w2.detach())

    # infeasible parameters: raise (nothing moves) or project
    bad = torch.tensor([[0.7, 0.7, -0.4]], dtype=D64, requires_grad=True)
    bad.grad = torch.ones_like(bad)
    with pytest.raises(ValueError, match=r"^params"):
        MirrorDescent([bad], mirror="entropic").step()
    assert torch.equal(bad.detach(), torch.tensor([[0.7, 0.7, -0.4]], dtype=D64))
    MirrorDescent([bad], lr=0.0, mirror="entropic", infeasible="project").step()
    torch.testing.assert_close(bad.detach(), torch.tensor([[0.5, 0.5, 0.0]], dtype=D64))

    # lr = 0 on feasible parameters moves nothing, bit for bit (both variants)
    for variant in ("greedy", "lazy"):
        z = _simplex_points(2, 5, 5).requires_grad_(True)
        before = z.detach().clone()
        z.grad = torch.randn(2, 5, generator=gen, dtype=D64)
        MirrorDescent([z], lr=0.0, mirror="entropic", variant=variant).step()
        assert torch.equal(z.detach(), before)

    # NaN gradients: raise before moving, or skip and count
    z = _simplex_points(1, 4, 6).requires_grad_(True)
    before = z.detach().clone()
    z.grad = torch.tensor([[0.0, math.nan, 0.0, 0.0]], dtype=D64)
    with pytest.raises(NonFiniteGradientError):
        MirrorDescent([z], mirror="entropic").step()
    opt = MirrorDescent([z], mirror="entropic", nonfinite="skip")
    opt.step()
    assert torch.equal(z.detach(), before) and opt.skipped_steps == 1
