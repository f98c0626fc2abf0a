"""BilevelProblem's oracles against direct autograd, dense Hessians and the analytic GLM gradients."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from optarium.bilevel.problem import BilevelProblem, WorkCounter, batch_size, check_batch, sample_batch, take

F64 = torch.float64


def _logistic(weighted: bool = False, analytic: bool = False) -> tuple[BilevelProblem, tuple, tuple]:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(30, 4, generator=g, dtype=F64)
    y = (torch.rand(30, generator=g, dtype=F64) < 0.5).to(F64)
    idx = torch.arange(30)
    Xv = torch.randn(20, 4, generator=g, dtype=F64)
    yv = (torch.rand(20, generator=g, dtype=F64) < 0.5).to(F64)

    def nll(th, X_, y_):
        z = X_ @ th
        return torch.nn.functional.softplus(z) - y_ * z

    problem = BilevelProblem(
        lambda v, th, b: nll(th, b[0], b[1]),
        lambda v, th, b: nll(th, b[0], b[1]).mean(),
        lambda v, th: 0.5 * (torch.exp(v[:4]) * th**2).sum(),
        per_sample_grad=(lambda v, th, b: (torch.sigmoid(b[0] @ th) - b[1]).unsqueeze(1) * b[0])
        if analytic
        else None,
        sample_weight=(lambda v, b: torch.sigmoid(v[4:][b[2]])) if weighted else None,
    )
    return problem, (X, y, idx), (Xv, yv, torch.arange(20))


def _v() -> torch.Tensor:
    return torch.cat([torch.full((4,), -1.0, dtype=F64), torch.linspace(-2, 2, 30, dtype=F64)])


def test_per_sample_grads_by_vmap_equal_a_loop_and_the_analytic_form() -> None:
    problem, train, _ = _logistic()
    th = torch.tensor([0.3, -0.2, 0.5, 1.0], dtype=F64)
    G = problem.per_sample_grads(_v(), th, train)
    rows = []
    for i in range(30):
        t = th.clone().requires_grad_(True)
        one = take(train, torch.tensor([i]))
        (gi,) = torch.autograd.grad(problem.per_sample_losses(_v(), t, one)[0], t)
        rows.append(gi)
    torch.testing.assert_close(G, torch.stack(rows), rtol=1e-12, atol=1e-14)
    analytic, _, _ = _logistic(analytic=True)
    torch.testing.assert_close(analytic.per_sample_grads(_v(), th, train), G, rtol=1e-12, atol=1e-14)


def test_weighted_inner_gradient_is_the_weighted_mean_of_per_sample_grads() -> None:
    problem, train, _ = _logistic(weighted=True)
    v, th = _v(), torch.tensor([0.3, -0.2, 0.5, 1.0], dtype=F64)
    G = problem.per_sample_grads(v, th, train)
    w = torch.sigmoid(v[4:])
    expected = (w.unsqueeze(1) * G).mean(0) + torch.exp(v[:4]) * th
    torch.testing.assert_close(problem.inner_grad(v, th, train), expected, rtol=1e-12, atol=1e-14)


def test_hvp_mixed_term_and_hessians_match_dense_autograd() -> None:
    problem, train, val = _logistic(weighted=True)
    v, th = _v(), torch.tensor([0.3, -0.2, 0.5, 1.0], dtype=F64)
    H = torch.autograd.functional.hessian(lambda t: problem.inner_loss(v, t, train), th)
    torch.testing.assert_close(problem.inner_hessian(v, th, train), H, rtol=1e-12, atol=1e-14)
    w = torch.tensor([1.0, -2.0, 0.5, 0.25], dtype=F64)
    counter = WorkCounter()
    torch.testing.assert_close(problem.hvp_operator(v, th, train, counter)(w), H @ w, rtol=1e-12, atol=1e-14)
    assert counter.get("hvps") == 1 and counter.get("hvp_samples") == 30
    # mixed term ∇_v <∇_θ g, w> against the full Jacobian of ∇_θ g in v
    J = torch.autograd.functional.jacobian(
        lambda vv: torch.func.grad(lambda t: problem.inner_loss(vv, t, train))(th), v
    )
    torch.testing.assert_close(problem.mixed_vjp(v, th, train, w), J.T @ w, rtol=1e-12, atol=1e-14)
    R = problem.regularizer_hessian(v, th)
    torch.testing.assert_close(R, torch.diag(torch.exp(v[:4])))
    analytic = dataclasses.replace(
        problem, regularizer_hessian_fn=lambda vv, t: torch.diag(torch.exp(vv[:4]))
    )
    torch.testing.assert_close(analytic.regularizer_hessian(v, th), R, rtol=1e-14, atol=0.0)
    wrong = dataclasses.replace(problem, regularizer_hessian_fn=lambda vv, t: torch.exp(vv[:4]))
    with pytest.raises(ValueError, match=r"^regularizer_hessian_fn"):
        wrong.regularizer_hessian(v, th)
    gv, gt = problem.outer_grads(v, th, val)
    assert float(gv.abs().max()) == 0.0 and gt.shape == (4,)


def test_batches_and_sampling() -> None:
    _, train, _ = _logistic()
    assert batch_size(train) == 30
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    b1, b2 = sample_batch(train, 8, g1), sample_batch(train, 8, g2)
    assert batch_size(b1) == 8 and all(torch.equal(x, y) for x, y in zip(b1, b2, strict=True))
    assert len(set(b1[2].tolist())) == 8  # without replacement
    assert sample_batch(train, 100) is train
    with pytest.raises(ValueError, match=r"^batch"):
        check_batch("batch", (torch.zeros(3), torch.zeros(4)))
    with pytest.raises(TypeError, match=r"^batch"):
        check_batch("batch", [1, 2])


def test_bad_shapes_and_non_finite_values_are_named() -> None:
    problem, train, val = _logistic()
    th = torch.zeros(4, dtype=F64)
    bad = BilevelProblem(lambda v, t, b: (b[0] @ t).sum(), problem.outer_loss)
    with pytest.raises(ValueError, match=r"^inner_loss_per_sample"):
        bad.inner_loss(_v(), th, train)
    bad_outer = BilevelProblem(problem.inner_loss_per_sample, lambda v, t, b: b[0] @ t)
    with pytest.raises(ValueError, match=r"^outer_loss"):
        bad_outer.outer(_v(), th, val)
    with pytest.raises(ValueError, match=r"^theta"):
        problem.inner_grad(_v(), torch.zeros(2, 2, dtype=F64), train)
    with pytest.raises(FloatingPointError):
        problem.inner_grad(_v(), torch.full((4,), math.nan, dtype=F64), train)
    with pytest.raises(TypeError, match=r"^outer_loss"):
        BilevelProblem(problem.inner_loss_per_sample, 3)  # type: ignore[arg-type]


def test_work_counter_phases_and_pass_equivalents() -> None:
    c = WorkCounter()
    c.add("sample_grads", 200)
    c.phase = "post"
    c.add("hvp_samples", 100)
    c.add("mixed_backwards")
    assert c.get("sample_grads") == 200 and c.get("sample_grads", "post") == 0
    assert c.gradient_pass_equivalents(100, "post") == 2.0 + 2.0
    assert c.as_dict() == {
        "inner:sample_grads": 200.0,
        "post:hvp_samples": 100.0,
        "post:mixed_backwards": 1.0,
    }
