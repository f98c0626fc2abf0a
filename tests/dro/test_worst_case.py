"""Exact worst cases over reweighting sets: against cvxpy, closed forms, limits, gradients and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.dro import KL, ChiSquare, CVaR, TotalVariation, Wasserstein, worst_case

SETS = [
    KL(0.05),
    KL(0.6),
    KL(4.0),
    ChiSquare(0.05),
    ChiSquare(0.8),
    ChiSquare(30.0),
    TotalVariation(0.15),
    TotalVariation(0.95),
    CVaR(0.13),
    CVaR(0.5),
    CVaR(1.0),
]


def _cvxpy_worst_case(losses: torch.Tensor, p: torch.Tensor, amb: object) -> float:
    cp = pytest.importorskip("cvxpy", reason="cvxpy is the exact reference (experiments extra)")
    n = losses.numel()
    q = cp.Variable(n, nonneg=True)
    pn, ln = p.numpy(), losses.numpy()
    cons = [cp.sum(q) == 1]
    if isinstance(amb, KL):
        cons.append(cp.sum(cp.kl_div(q, pn)) <= amb.radius)  # kl_div = q log(q/p) - q + p; the sums cancel
    elif isinstance(amb, ChiSquare):
        cons.append(0.5 * cp.sum(cp.multiply(1.0 / pn, cp.square(q - pn))) <= amb.radius)
    elif isinstance(amb, TotalVariation):
        cons.append(0.5 * cp.norm1(q - pn) <= amb.radius)
    else:
        cons.append(q <= pn / amb.alpha)
    problem = cp.Problem(cp.Maximize(ln @ q), cons)
    problem.solve(solver="CLARABEL")
    return float(problem.value)


@pytest.mark.parametrize("amb", SETS, ids=lambda a: a.describe())
def test_worst_case_equals_the_convex_program(amb: object) -> None:
    g = torch.Generator().manual_seed(3)
    for n, tie in [(1, False), (2, False), (9, True), (25, False)]:
        losses = torch.randn(n, generator=g, dtype=torch.float64)
        if tie:
            losses[:2] = losses.max() + 0.5
        p = torch.rand(n, generator=g, dtype=torch.float64) + 0.05
        p /= p.sum()
        wc = worst_case(losses, amb, p)
        assert float(wc.value) == pytest.approx(_cvxpy_worst_case(losses, p, amb), abs=2e-7)
        assert float(wc.q.sum()) == pytest.approx(1.0, abs=1e-12)
        assert bool((wc.q >= 0).all())
        assert float((wc.q * losses).sum()) == pytest.approx(float(wc.value), abs=1e-12)


@pytest.mark.parametrize("amb", SETS, ids=lambda a: a.describe())
def test_worst_case_weights_stay_inside_the_set(amb: object) -> None:
    losses = torch.randn(4, 30, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    wc = worst_case(losses, amb)
    if isinstance(amb, (KL, ChiSquare, TotalVariation)):
        assert bool((wc.divergence <= amb.radius + 1e-9).all())
    else:
        assert bool((wc.divergence <= 1.0 / amb.alpha + 1e-9).all())


def test_batched_rows_equal_one_row_at_a_time() -> None:
    g = torch.Generator().manual_seed(1)
    losses = torch.randn(3, 5, 17, generator=g, dtype=torch.float64)
    p = torch.rand(17, generator=g, dtype=torch.float64)
    p /= p.sum()
    for amb in SETS:
        batched = worst_case(losses, amb, p)
        for i in range(3):
            for j in range(5):
                row = worst_case(losses[i, j], amb, p)
                assert torch.allclose(batched.value[i, j], row.value, atol=1e-12, rtol=0)
                assert torch.allclose(batched.q[i, j], row.q, atol=1e-12, rtol=0)


def test_limits_radius_zero_is_the_mean_and_large_radius_the_max() -> None:
    losses = torch.tensor([0.3, -1.0, 2.5, 0.7], dtype=torch.float64)
    for amb in (KL(0.0), ChiSquare(0.0), TotalVariation(0.0), CVaR(1.0)):
        assert float(worst_case(losses, amb).value) == pytest.approx(float(losses.mean()), abs=1e-12)
    for amb in (KL(math.log(4.0) + 1e-9), ChiSquare(1.5), TotalVariation(1.0), CVaR(0.25)):
        assert float(worst_case(losses, amb).value) == pytest.approx(2.5, abs=1e-12)


def test_closed_forms_cvar_and_small_chi2() -> None:
    losses = torch.arange(10, dtype=torch.float64)
    assert float(worst_case(losses, CVaR(0.25)).value) == pytest.approx((9 + 8 + 0.5 * 7) / 2.5)
    x = torch.randn(200, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    rho = 1e-3  # no weight reaches zero: mean + sqrt(2 rho) * std (ddof 0)
    expect = float(x.mean() + math.sqrt(2 * rho) * x.std(unbiased=False))
    assert float(worst_case(x, ChiSquare(rho)).value) == pytest.approx(expect, abs=1e-12)


def test_kl_weights_are_exponential_tilts_with_the_reported_multiplier() -> None:
    x = torch.randn(40, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    wc = worst_case(x, KL(0.3))
    lam = wc.dual["lambda"]
    tilt = torch.softmax(x / lam, -1)
    assert torch.allclose(wc.q, tilt, atol=1e-12, rtol=0)
    assert float(wc.divergence) == pytest.approx(0.3, abs=1e-10)
    dual = float(lam * 0.3 + lam * torch.logsumexp(x / lam - math.log(40), -1))
    assert float(wc.value) == pytest.approx(dual, abs=1e-10)


def test_gradient_in_the_losses_is_the_worst_case_weights() -> None:
    x = torch.randn(12, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    for amb in (KL(0.4), ChiSquare(0.4), CVaR(0.3), TotalVariation(0.2)):
        xr = x.clone().requires_grad_(True)
        wc = worst_case(xr, amb)
        (grad,) = torch.autograd.grad(wc.value, xr)
        assert torch.allclose(grad, wc.q.detach())
        for i in range(3):  # Danskin: the value's derivative by central differences
            e = torch.zeros(12, dtype=torch.float64)
            e[i] = 1e-6
            fd = (worst_case(x + e, amb).value - worst_case(x - e, amb).value) / 2e-6
            assert float(fd) == pytest.approx(float(grad[i]), abs=1e-5)


def test_zero_weights_keep_zero_mass_and_dtype_follows() -> None:
    x = torch.tensor([5.0, 1.0, 2.0, 0.5], dtype=torch.float32)
    p = torch.tensor([0.0, 0.5, 0.25, 0.25], dtype=torch.float32)
    for amb in SETS:
        wc = worst_case(x, amb, p)
        assert wc.q.dtype == torch.float32 and wc.value.dtype == torch.float32
        assert float(wc.q[0]) == 0.0
        assert float(wc.value) <= 2.0 + 1e-6


@pytest.mark.parametrize(
    ("call", "name", "err"),
    [
        (lambda: worst_case([1.0, 2.0], KL(0.1)), "losses", TypeError),
        (lambda: worst_case(torch.tensor([1, 2]), KL(0.1)), "losses", TypeError),
        (lambda: worst_case(torch.tensor([1.0, math.nan]), KL(0.1)), "losses", ValueError),
        (lambda: worst_case(torch.ones(0), KL(0.1)), "losses", ValueError),
        (lambda: worst_case(torch.ones(3), 0.1), "ambiguity", TypeError),
        (lambda: worst_case(torch.ones(3), Wasserstein(0.1)), "ambiguity", TypeError),
        (lambda: worst_case(torch.ones(3), KL(0.1), torch.ones(3)), "weights", ValueError),
        (lambda: worst_case(torch.ones(3), KL(0.1), torch.ones(2) / 2), "weights", ValueError),
        (lambda: worst_case(torch.ones(3), KL(0.1), torch.tensor([1.5, -0.5, 0.0])), "weights", ValueError),
        (lambda: KL(-1.0), "radius", ValueError),
        (lambda: ChiSquare(math.inf), "radius", ValueError),
        (lambda: TotalVariation(1.5), "radius", ValueError),
        (lambda: CVaR(0.0), "alpha", ValueError),
        (lambda: Wasserstein(0.1, p=3), "p", ValueError),
    ],
)
def test_bad_input_names_the_argument(call: object, name: str, err: type) -> None:
    with pytest.raises(err, match=f"^{name}"):
        call()
