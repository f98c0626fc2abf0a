"""Tests for optarium.ot.sinkhorn: entropic OT vs POT, marginals, duality, gradients, dtype, bad input."""

from __future__ import annotations

import pickle

import pytest
import torch

from optarium.ot import OTResult, sinkhorn

torch.set_num_threads(1)
F64 = torch.float64


def _problem(n=7, m=5, batch=(), seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, n, 2, generator=g, dtype=F64)
    y = torch.randn(*batch, m, 2, generator=g, dtype=F64)
    cost = torch.cdist(x, y).square()
    a = torch.rand(*batch, n, generator=g, dtype=F64) + 0.1
    b = torch.rand(*batch, m, generator=g, dtype=F64) + 0.1
    return cost.to(dtype), (a / a.sum(-1, keepdim=True)).to(dtype), (b / b.sum(-1, keepdim=True)).to(dtype)


def test_matches_pot_sinkhorn_log_plan_and_values():
    ot = pytest.importorskip("ot", reason="POT is the independent reference for entropic OT")
    cost, a, b = _problem()
    res = sinkhorn(cost, a, b, reg=0.2, tol=1e-13)
    ref = ot.bregman.sinkhorn_log(a, b, cost, 0.2, stopThr=1e-14, numItermax=100_000)
    assert res.status == "converged"
    assert float((res.plan - ref).abs().max()) < 1e-11
    # POT's sinkhorn2 value is the linear cost <C, plan>.
    ref2 = ot.bregman.sinkhorn2(a, b, cost, 0.2, method="sinkhorn_log", stopThr=1e-14, numItermax=100_000)
    assert abs(float(res.value_linear) - float(ref2)) < 1e-11


def test_marginals_column_exact_row_within_tol():
    cost, a, b = _problem(n=30, m=20, batch=(3,), seed=1)
    res = sinkhorn(cost, a, b, reg=0.1, tol=1e-8)
    assert res.converged and res.n_iter >= 1
    assert (res.plan >= 0).all()
    assert float((res.plan.sum(-2) - b).abs().max()) <= 1e-15
    row_err = (res.plan.sum(-1) - a).abs().amax(-1) / a.amax(-1)
    assert float(row_err.max()) <= 1e-8
    assert res.marginal_error <= 1e-8 and res.history[-1] == res.marginal_error
    assert len(res.history) == res.n_iter


def test_potentials_give_the_plan_and_duality_gap_closes():
    cost, a, b = _problem(seed=2)
    res = sinkhorn(cost, a, b, reg=0.3, tol=1e-13)
    f, g = res.potentials
    assert float((torch.exp((f[:, None] + g[None] - cost) / 0.3) - res.plan).abs().max()) < 1e-14
    gap = float(res.value - res.dual_value)
    assert -1e-12 <= gap <= 1e-12
    # Weak duality: any feasible plan costs at least the dual value (the independent plan a b^T here).
    indep = a[:, None] * b[None]
    primal_indep = (cost * indep).sum() + 0.3 * torch.special.xlogy(indep, indep).sum()
    assert float(primal_indep) >= float(res.dual_value) - 1e-12
    assert float(res.value) <= float(primal_indep) + 1e-12


def test_value_matches_pot_entropic_objective():
    ot = pytest.importorskip("ot", reason="POT is the independent reference for entropic OT")
    cost, a, b = _problem(seed=3)
    ref = ot.solve(cost, a, b, reg=0.2, reg_type="entropy", max_iter=100_000, tol=1e-14)
    res = sinkhorn(cost, a, b, reg=0.2, tol=1e-13)
    assert float((res.plan - ref.plan).abs().max()) < 1e-10
    assert abs(float(res.value) - float(ref.value)) < 1e-10
    assert abs(float(res.value_linear) - float(ref.value_linear)) < 1e-10


def test_batched_equals_per_problem_and_broadcast_masses():
    cost, a, b = _problem(batch=(2, 3), seed=4)
    res = sinkhorn(cost, a, b, reg=0.2, tol=1e-12)
    assert res.plan.shape == (2, 3, 7, 5) and res.value.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            rij = sinkhorn(cost[i, j], a[i, j], b[i, j], reg=0.2, tol=1e-12)
            assert torch.allclose(res.plan[i, j], rij.plan, atol=1e-12)
    shared = sinkhorn(cost, a[0, 0], b[0, 0], reg=0.2, tol=1e-12)  # masses broadcast over the batch
    assert shared.plan.shape == (2, 3, 7, 5)
    assert torch.allclose(shared.plan.sum(-1), a[0, 0].expand(2, 3, 7), atol=1e-10)


def test_uniform_default_masses():
    cost, _, _ = _problem(n=6, m=4, seed=5)
    res = sinkhorn(cost, reg=0.5, tol=1e-12)
    assert torch.allclose(res.plan.sum(-1), torch.full((6,), 1 / 6, dtype=F64), atol=1e-12)
    assert torch.allclose(res.plan.sum(-2), torch.full((4,), 1 / 4, dtype=F64), atol=1e-15)


def test_warm_start_needs_fewer_iterations_and_gives_the_same_plan():
    cost, a, b = _problem(n=20, m=20, seed=6)
    cold = sinkhorn(cost, a, b, reg=0.05, tol=1e-10)
    warm = sinkhorn(cost * 1.001, a, b, reg=0.05, tol=1e-10, f_init=cold.potentials[0])
    again = sinkhorn(cost * 1.001, a, b, reg=0.05, tol=1e-10)
    assert warm.n_iter < again.n_iter
    assert float((warm.plan - again.plan).abs().max()) < 1e-8


def test_max_iter_status_and_to_result():
    cost, a, b = _problem(n=20, m=20, seed=7)
    res = sinkhorn(cost, a, b, reg=0.01, tol=1e-14, max_iter=3)
    assert res.status == "max_iter" and res.n_iter == 3 and res.marginal_error > 1e-14
    # The potentials stay the pair of the returned plan.
    f, g = res.potentials
    assert float((torch.exp((f[:, None] + g[None] - cost) / 0.01) - res.plan).abs().max()) < 1e-12
    out = sinkhorn(cost, a, b, reg=0.2, tol=1e-12).to_result()
    assert out.status == "converged" and out.x.shape == (20, 20)
    assert out.history.metrics["marginal_error"][-1] <= 1e-12
    assert set(out.extras) >= {"f", "g", "value_linear", "dual_value", "marginal_error"}
    with pytest.raises(ValueError, match=r"^plan"):
        sinkhorn(cost.expand(2, 20, 20), a, b, reg=0.2).to_result()


def test_result_pickles():
    cost, a, b = _problem(seed=8)
    res = sinkhorn(cost, a, b, reg=0.2)
    back = pickle.loads(pickle.dumps(res))
    assert isinstance(back, OTResult) and torch.equal(back.plan, res.plan) and back.status == res.status


@pytest.mark.parametrize("grad", ["implicit", "unrolled"])
def test_gradcheck_plan_and_values_float64(grad):
    cost, a, b = _problem(n=4, m=3, batch=(2,) if grad == "implicit" else (), seed=9)
    cost.requires_grad_(True)

    def fn(c):
        res = sinkhorn(c, a, b, reg=0.3, tol=1e-13, grad=grad)
        return res.plan, res.value, res.value_linear

    assert torch.autograd.gradcheck(fn, (cost,), eps=1e-6, atol=1e-6)


def test_value_gradient_is_the_plan_envelope():
    cost, a, b = _problem(seed=10)
    cost.requires_grad_(True)
    res = sinkhorn(cost, a, b, reg=0.2, tol=1e-13)
    (gc,) = torch.autograd.grad(res.value, cost)
    assert float((gc - res.plan.detach()).abs().max()) < 1e-10


def test_unrolled_gradient_reaches_the_masses():
    cost, a, b = _problem(n=4, m=3, seed=11)
    a = a.clone().requires_grad_(True)
    res = sinkhorn(cost, a, b, reg=0.5, tol=1e-12, grad="unrolled")
    (ga,) = torch.autograd.grad(res.value_linear, a)
    assert torch.isfinite(ga).all() and float(ga.abs().max()) > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_and_device_follow_the_cost(dtype):
    cost, a, b = _problem(seed=12, dtype=dtype)
    res = sinkhorn(cost, a.double(), b.double(), reg=0.2, tol=1e-5)
    for t in (res.plan, *res.potentials, res.value, res.value_linear, res.dual_value):
        assert t.dtype == dtype and t.device == cost.device
    assert res.converged


@pytest.mark.gpu
def test_runs_on_cuda():
    cost, a, b = _problem(seed=13)
    res = sinkhorn(cost.cuda(), a.cuda(), b.cuda(), reg=0.2, tol=1e-12)
    ref = sinkhorn(cost, a, b, reg=0.2, tol=1e-12)
    assert res.plan.device.type == "cuda"
    assert float((res.plan.cpu() - ref.plan).abs().max()) < 1e-10


def test_bad_input_names_the_argument():
    cost, a, b = _problem(n=4, m=3)
    cases = [
        (lambda: sinkhorn(cost.numpy(), a, b, reg=0.1), TypeError, "cost"),
        (lambda: sinkhorn(cost.long(), a, b, reg=0.1), TypeError, "cost"),
        (lambda: sinkhorn(cost[0], a, b, reg=0.1), ValueError, "cost"),
        (lambda: sinkhorn(cost.clone().fill_(float("nan")), a, b, reg=0.1), ValueError, "cost"),
        (lambda: sinkhorn(cost, a[:3], b, reg=0.1), ValueError, "a"),
        (lambda: sinkhorn(cost, a, b[:2], reg=0.1), ValueError, "b"),
        (lambda: sinkhorn(cost, torch.zeros(4, dtype=F64), b, reg=0.1), ValueError, "a"),
        (lambda: sinkhorn(cost, a, 2 * b, reg=0.1), ValueError, "b"),
        (lambda: sinkhorn(cost, a, b, reg=0.0), ValueError, "reg"),
        (lambda: sinkhorn(cost, a, b, reg="x"), TypeError, "reg"),
        (lambda: sinkhorn(cost, a, b, reg=0.1, tol=-1.0), ValueError, "tol"),
        (lambda: sinkhorn(cost, a, b, reg=0.1, max_iter=0), ValueError, "max_iter"),
        (lambda: sinkhorn(cost, a, b, reg=0.1, grad="exact"), ValueError, "grad"),
        (lambda: sinkhorn(cost, a, b, reg=0.1, f_init=torch.zeros(3, dtype=F64)), ValueError, "f_init"),
    ]
    for fn, exc, name in cases:
        with pytest.raises(exc) as info:
            fn()
        assert str(info.value).startswith(name), (name, str(info.value))


def test_timeout_and_diverged_are_reported_not_raised():
    cost, a, b = _problem(n=20, m=20, seed=14)
    res = sinkhorn(cost, a, b, reg=0.01, tol=1e-14, time_limit_s=0.0)
    assert res.status == "timeout" and res.n_iter == 1
    f, g = res.potentials  # still the pair of the returned plan
    assert float((torch.exp((f[:, None] + g[None] - cost) / 0.01) - res.plan).abs().max()) < 1e-12
    bad = sinkhorn(cost, a, b, reg=1e-310)  # C / reg overflows
    assert bad.status == "diverged" and bad.to_result().value == float("inf")
