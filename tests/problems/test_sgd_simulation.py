"""optarium.problems.sgd_simulation and WeaklyConvexOracle: batched (clipped, projected) SGD runs."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.problems.heavy_tail import StudentTNoise
from optarium.problems.sgd_simulation import quantile, simulate
from optarium.problems.weakly_convex import NonconvexLeastSquares, RobustPhaseRetrieval, WeaklyConvexOracle


def test_quantile_is_the_inverted_cdf() -> None:
    v = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert [quantile(v, q) for q in (0.0, 0.2, 0.21, 0.5, 0.99, 1.0)] == [1.0, 1.0, 2.0, 3.0, 5.0, 5.0]
    assert quantile(torch.tensor([[1.0, math.inf]]), 0.9) == math.inf
    assert math.isnan(quantile([], 0.5))
    with pytest.raises(ValueError, match=r"^q"):
        quantile(v, 1.5)


def test_oracles_are_the_spec_problems() -> None:
    ls = WeaklyConvexOracle("ls", 0.5)
    p = NonconvexLeastSquares.make()
    x = torch.randn(3, p.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(ls.grad(x), p.grad(x), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ls.metric(x), p.moreau_grad_norm(x, 0.5), rtol=0, atol=0)
    assert torch.equal(ls.x0, torch.zeros(p.dim, dtype=torch.float64)) and ls.dim == p.dim
    assert ls.radius == pytest.approx(2 * float(p.x_signal.norm()))
    pr = WeaklyConvexOracle("pr", 0.5)
    q = RobustPhaseRetrieval.make()
    assert torch.equal(pr.x0, q.start(0.3, seed=0))
    assert float(pr.metric(pr.x0.view(1, -1))[0]) == pytest.approx(0.3, rel=1e-9)
    torch.testing.assert_close(pr.grad(x[:, : pr.dim]), q.subgrad(x[:, : pr.dim]), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"^name"):
        WeaklyConvexOracle("logistic", 0.5)


def test_batched_projected_run_is_the_per_seed_loop_with_common_noise() -> None:
    problem, noise = WeaklyConvexOracle("ls", 0.5), StudentTNoise(1.5)
    steps, seeds, lr, tau, radius = 30, 3, 0.02, 1.0, 0.5
    last, rand = simulate(
        problem, noise, [lr], [tau], seeds=seeds, steps=steps, generator=torch.Generator().manual_seed(4),
        chunk=7, radius=radius, random_iterate=True,
    )  # fmt: skip
    gen = torch.Generator().manual_seed(4)
    r_idx = torch.randint(0, steps, (seeds,), generator=gen)
    draws = []
    t = 0
    while t < steps:  # the same stream layout: chunks of 7 steps
        n = min(7, steps - t)
        draws.append(noise.sample((n, seeds, problem.dim), gen))
        t += n
    u = torch.cat(draws)
    for j in range(seeds):
        x = problem.x0.clone()
        at_r = None
        for t in range(steps):
            if t == int(r_idx[j]):
                at_r = x.clone()
            g = problem.grad(x) + u[t, j]
            g = g * min(1.0, tau / float(g.norm()))
            x = x - lr * g
            x = x * min(1.0, radius / float(x.norm()))
        assert float(x.norm()) <= radius + 1e-12
        torch.testing.assert_close(last[0, j], problem.metric(x.view(1, -1))[0], rtol=1e-9, atol=0)
        torch.testing.assert_close(rand[0, j], problem.metric(at_r.view(1, -1))[0], rtol=1e-9, atol=0)


def test_divergence_is_reported_as_inf_and_bad_input() -> None:
    problem = WeaklyConvexOracle("ls", 0.5)
    last, rand = simulate(
        problem, StudentTNoise(1.5), [1e6, 1e-3], [math.inf, math.inf], seeds=2, steps=40,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    assert rand is None and last.shape == (2, 2)
    assert bool(torch.isinf(last[0]).all()) and bool(torch.isfinite(last[1]).all())
    with pytest.raises(ValueError, match=r"^clips"):
        simulate(
            problem, StudentTNoise(1.5), [0.1], [1.0, 2.0], seeds=2, steps=3, generator=torch.Generator()
        )
    with pytest.raises(ValueError, match=r"^seeds"):
        simulate(problem, StudentTNoise(1.5), [0.1], [1.0], seeds=0, steps=3, generator=torch.Generator())
