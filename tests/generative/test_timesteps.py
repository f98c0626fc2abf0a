"""Falsifiable checks of the probabilistic-mask timestep search (optarium.generative.timesteps)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from optarium.generative.denoiser import EpsMLP, linear_alphas_cumprod
from optarium.generative.timesteps import (
    SCHEDULES,
    TimestepMask,
    bilevel_timestep_search,
    capped_simplex_projection,
    handcrafted_schedule,
    policy_gradient,
    sample,
)

ABAR = linear_alphas_cumprod(1000)
MU, SD = 2.0, 0.5


def exact_eps(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The exact epsilon-predictor of N(MU, SD^2) data: DDIM is then affine in the noise."""
    a = ABAR.to(x.dtype)[t][:, None]
    return (1 - a).sqrt() * (x - a.sqrt() * MU) / (a * SD**2 + 1 - a)


def ddim_output_w2(schedule: list[int]) -> float:
    """Exact W2 between DDIM's (Gaussian) output law from x_T ~ N(0, 1) and N(MU, SD^2)."""
    x = sample(exact_eps, torch.tensor([[0.0], [1.0]], dtype=torch.float64), schedule, ABAR)
    shift, slope = float(x[0, 0]), float(x[1, 0] - x[0, 0])
    return math.hypot(shift - MU, abs(slope) - SD)


def test_capped_simplex_projection_matches_a_qp_solve() -> None:
    cvxpy = pytest.importorskip("cvxpy", reason="cvxpy (experiments extra) gives the reference QP solve")
    g = torch.Generator().manual_seed(0)
    for n, total in ((6, 2.0), (8, 3.0), (5, 0.5)):
        v = torch.randn(n, generator=g, dtype=torch.float64) * 2
        s = capped_simplex_projection(v, total)
        assert float(s.min()) >= 0 and float(s.max()) <= 1
        assert abs(float(s.sum()) - total) < 1e-9
        z = cvxpy.Variable(n)
        cvxpy.Problem(
            cvxpy.Minimize(cvxpy.sum_squares(z - v.numpy())), [z >= 0, z <= 1, cvxpy.sum(z) == total]
        ).solve()
        assert torch.allclose(s, torch.as_tensor(z.value), atol=1e-5)
    batch = torch.randn(4, 7, generator=g, dtype=torch.float32)
    out = capped_simplex_projection(batch, 3.0)
    assert out.dtype == torch.float32 and torch.allclose(out.sum(-1), torch.full((4,), 3.0), atol=1e-5)


def test_policy_gradient_is_unbiased_for_a_quadratic_quality() -> None:
    g = torch.Generator().manual_seed(1)
    n = 5
    a = torch.randn(n, generator=g, dtype=torch.float64)
    b = torch.triu(torch.randn(n, n, generator=g, dtype=torch.float64), 1)
    s = torch.tensor([0.2, 0.5, 0.7, 0.35, 0.6], dtype=torch.float64)
    # analytic gradient of E[sum a_i m_i + sum_{i<j} b_ij m_i m_j] = a + (b + b^T) s
    exact = a + (b + b.T) @ s
    R, reps = 8, 4000
    m = (torch.rand(reps, R, n, generator=g, dtype=torch.float64) < s).to(torch.float64)
    q = m @ a + torch.einsum("rki,ij,rkj->rk", m, b, m)
    est = torch.stack([policy_gradient(m[r], q[r], s) for r in range(reps)])
    mean, se = est.mean(0), est.std(0) / math.sqrt(reps)
    assert bool(((mean - exact).abs() < 4 * se).all()), (mean, exact, se)


def test_mask_sampling_counts_endpoints_and_nfe() -> None:
    cand = list(range(999, -1, -10))
    mask = TimestepMask(cand, K=5, generator=torch.Generator().manual_seed(2))
    draws = mask.sample(2000)
    assert bool(draws[:, 0].all()) and bool(draws[:, -1].all())
    counts = draws.sum(1).to(torch.float64)
    assert abs(float(counts.mean()) - 5) < 3 * float(counts.std()) / math.sqrt(2000)
    sched = mask.schedule_of(draws[0])
    assert all(a > b for a, b in itertools.pairwise(sched))
    calls = []

    def counting(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return exact_eps(x, t)

    _, nfe = sample(counting, torch.zeros(3, 1, dtype=torch.float64), sched, ABAR, return_nfe=True)
    assert nfe == len(calls) == len(sched) - 1
    _, nfe = sample(
        counting, torch.zeros(3, 1, dtype=torch.float64), sched, ABAR, solver="dpmpp2m", return_nfe=True
    )
    assert nfe == len(sched) - 1


def test_full_mask_is_ddim_on_the_whole_grid() -> None:
    cand = torch.linspace(999, 0, 20).round().long().tolist()
    mask = TimestepMask(cand, K=20, generator=torch.Generator().manual_seed(0))
    assert bool(mask.sample(3).all())
    x = torch.randn(16, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    full = sample(exact_eps, x, mask.schedule(), ABAR)
    # DDIM by hand on the same grid
    y = x.clone()
    for t, s in itertools.pairwise(cand):
        e = exact_eps(y, torch.full((16,), t))
        x0 = (y - (1 - ABAR[t]).sqrt() * e) / ABAR[t].sqrt()
        y = ABAR[s].sqrt() * x0 + (1 - ABAR[s]).sqrt() * e
    assert torch.equal(full, y)


def test_solvers_and_schedules_agree_with_diffusers() -> None:
    diffusers = pytest.importorskip("diffusers", reason="diffusers (generative extra) is the reference")
    x0 = torch.randn(32, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sched = [999, 700, 400, 150, 40, 0]
    for order, solver in ((1, "ddim"), (2, "dpmpp2m")):
        sc = diffusers.DPMSolverMultistepScheduler(
            num_train_timesteps=1000,
            beta_schedule="linear",
            solver_order=order,
            final_sigmas_type="sigma_min",
            algorithm_type="dpmsolver++",
        )
        sc.set_timesteps(timesteps=sched[:-1])  # export: a list of ints is accepted
        x = x0.clone()
        for t in sc.timesteps:
            x = sc.step(exact_eps(x, torch.full((32,), int(t))), t, x).prev_sample
        assert torch.allclose(sample(exact_eps, x0, sched, ABAR, solver=solver), x, atol=1e-5)
    for K in (5, 10):
        for kind, kw in (
            ("karras", {"use_karras_sigmas": True}),
            ("logsnr", {"use_lu_lambdas": True}),
            ("uniform", {"timestep_spacing": "linspace"}),
        ):
            sc = diffusers.DPMSolverMultistepScheduler(num_train_timesteps=1000, beta_schedule="linear", **kw)
            sc.set_timesteps(K if kind != "uniform" else K - 1)
            ref = sc.timesteps.tolist() + ([0] if kind == "uniform" else [])
            assert handcrafted_schedule(kind, K, ABAR) == ref, kind
    assert handcrafted_schedule("quadratic", 5, ABAR) == [999, 562, 250, 62, 0]
    for kind in SCHEDULES:
        assert len(handcrafted_schedule(kind, 7, ABAR)) == 7


def test_known_optimum_toy_gaussian() -> None:
    """M = 12, K = 4 (45 subsets): every seed beats time-uniform; the median is near the brute-force
    optimum."""
    cand = torch.linspace(999, 0, 12).round().long().tolist()
    best = min(
        ddim_output_w2([cand[0], a, b, cand[-1]]) for i, a in enumerate(cand[1:-1]) for b in cand[2 + i : -1]
    )
    uniform = ddim_output_w2(handcrafted_schedule("uniform", 4, ABAR))
    noise = torch.tensor([[0.0], [1.0]], dtype=torch.float64)

    def quality(x: torch.Tensor) -> torch.Tensor:
        return torch.hypot(x[0, 0] - MU, (x[1, 0] - x[0, 0]).abs() - SD)

    found = []
    for seed in range(5):
        res = bilevel_timestep_search(
            exact_eps,
            quality_fn=quality,
            noise=noise,
            K=4,
            alphas_cumprod=ABAR,
            candidates=cand,
            outer_steps=80,
            lr=0.3,
            seed=seed,
            record_every=80,
        )
        found.append(ddim_output_w2(res.x))
        assert res.extras["nfe"] == 3 and len(res.x) == 4
    assert all(w < uniform for w in found), (found, uniform)
    assert sorted(found)[2] <= 1.3 * best, (found, best)


def test_outer_progress_and_inner_isolation() -> None:
    torch.manual_seed(0)
    model = EpsMLP(2, width=16, depth=1).to(torch.float64)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    data = torch.randn(64, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    noise = torch.randn(64, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)

    def q(x: torch.Tensor) -> torch.Tensor:
        return (x.mean(0) - data.mean(0)).pow(2).sum() + (x.std(0) - data.std(0)).pow(2).sum()

    cand = torch.linspace(999, 0, 16).round().long().tolist()
    kw = {"quality_fn": q, "noise": noise, "K": 4, "alphas_cumprod": ABAR, "candidates": cand, "seed": 0}
    res = bilevel_timestep_search(model, outer_steps=30, lr=0.2, **kw)
    assert res.history.metrics["quality"][-1] < res.history.metrics["quality"][0]
    assert res.extras["model_state"] is None
    assert res.extras["probs"].dtype == torch.float64
    r32 = bilevel_timestep_search(model.float(), outer_steps=1, **{**kw, "noise": noise.float()})
    assert r32.extras["probs"].dtype == torch.float32 and isinstance(r32.x, list)
    model.double()
    # J = 0: weights unchanged; J > 0: the caller's model is untouched, the fine-tuned copy differs
    bil = bilevel_timestep_search(model, outer_steps=2, inner_steps=2, inner_lr=1e-2, data=data, **kw)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert any(not torch.equal(before[k], v) for k, v in bil.extras["model_state"].items())
    # the R qualities of the first outer step use the pre-update weights: the first step's mean quality is the
    # same with and without inner steps (same seed, same draws)
    assert bil.history.metrics["mean_quality"][1] == pytest.approx(
        bilevel_timestep_search(model, outer_steps=1, **kw).history.metrics["mean_quality"][1], rel=1e-12
    )


def test_inner_loss_uses_only_selected_timesteps() -> None:
    from optarium.generative import timesteps as ts

    seen: list[torch.Tensor] = []

    class Spy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(()))

        def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            seen.append(t.detach().clone())
            return self.w * x

    data = torch.randn(32, 2, dtype=torch.float64)
    sched, cand = [999, 600, 300, 0], torch.linspace(999, 0, 20).round().long().tolist()
    ts._inner_loss(Spy(), data, sched, cand, ABAR, "eps", 32, torch.Generator().manual_seed(0))
    assert set(torch.cat(seen).tolist()) <= set(sched)
    seen.clear()
    ts._inner_loss(Spy(), data, sched, cand, ABAR, "eps+consistency", 32, torch.Generator().manual_seed(0))
    assert set(torch.cat(seen).tolist()) <= set(cand) | set(sched)


def test_state_dict_round_trip_and_determinism() -> None:
    cand = list(range(99, -1, -9))
    a = TimestepMask(cand, K=4, generator=torch.Generator().manual_seed(5))
    m = a.sample()
    a.update(m, torch.arange(8, dtype=torch.float64))
    state = a.state_dict()
    b = TimestepMask(cand, K=4, generator=torch.Generator().manual_seed(99))
    b.load_state_dict(state)
    assert torch.equal(a.sample(), b.sample())
    assert torch.equal(a.probs, b.probs)
    assert abs(float(a.probs.sum()) - 2) < 1e-9


def test_bad_input() -> None:
    cand = list(range(99, -1, -9))
    with pytest.raises(ValueError, match=r"^K"):
        TimestepMask(cand, K=1)
    with pytest.raises(ValueError, match=r"^K"):
        TimestepMask(cand, K=len(cand) + 1)
    with pytest.raises(ValueError, match=r"^candidates"):
        TimestepMask([0, 10, 20], K=2)
    with pytest.raises(ValueError, match=r"^n_samples"):
        TimestepMask(cand, K=3, n_samples=1)
    mask = TimestepMask(cand, K=3)
    with pytest.raises(FloatingPointError):
        mask.update(mask.sample(), torch.tensor([math.nan] + [0.0] * 7))
    noise = torch.zeros(4, 1, dtype=torch.float64)
    with pytest.raises(FloatingPointError):
        bilevel_timestep_search(
            exact_eps, quality_fn=lambda x: math.nan, noise=noise, K=3, alphas_cumprod=ABAR, outer_steps=1
        )
    with pytest.raises(ValueError, match=r"^solver"):
        sample(exact_eps, noise, [999, 0], ABAR, solver="euler")
    with pytest.raises(ValueError, match=r"^data"):
        bilevel_timestep_search(
            exact_eps, quality_fn=lambda x: 0.0, noise=noise, K=3, alphas_cumprod=ABAR, inner_steps=1
        )
