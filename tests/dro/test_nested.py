"""Nested DRO (spec shared/papers/nested-dro.md, "Tests that would show it works"): limits, exact weights
against cvxpy, the variance identity, decoupling, outlier suppression and leverage preservation."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from optarium.dro import KL, ChiSquare, CVaR, linear_wasserstein_penalty, wasserstein_worst_case, worst_case
from optarium.dro.nested import (
    NestedDRO,
    NestedDRORegressor,
    nested_dro_fit,
    nested_linear_value,
    optimistic_weights,
    outer_ambiguity,
)

torch.set_num_threads(1)
F64 = torch.float64
_Y2 = torch.ones(2, dtype=F64)  # the wrong length for three samples


def _data(n: int = 40, d: int = 3, seed: int = 0, outliers: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=F64)
    theta = torch.randn(d, generator=g, dtype=F64)
    y = X @ theta + 0.5 * torch.randn(n, generator=g, dtype=F64)
    y[:outliers] += 40.0
    return X, y, theta


def _cvxpy_weights(r: torch.Tensor, outer: str, rho: float) -> tuple[float, list[float]]:
    cp = pytest.importorskip("cvxpy")
    n = r.numel()
    q = cp.Variable(n, nonneg=True)
    rr = r.numpy()
    if outer == "chi2":
        div = cp.sum_squares(n * q - 1) / (2 * n)
    else:
        div = cp.sum(cp.rel_entr(q, 1.0 / n))
    prob = cp.Problem(cp.Minimize(rr @ q), [cp.sum(q) == 1, div <= rho])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(prob.value), list(q.value)


@pytest.mark.parametrize(
    ("outer", "rho", "tol"), [("chi2", 0.1, 1e-6), ("chi2", 0.5, 1e-6), ("kl", 0.2, 1e-5)]
)
def test_weights_equal_the_cvxpy_solution(outer: str, rho: float, tol: float) -> None:
    r = torch.rand(30, generator=torch.Generator().manual_seed(3), dtype=F64) * 4.0
    rw = optimistic_weights(r, outer, rho)
    value, _ = _cvxpy_weights(r, outer, rho)
    assert abs(float(rw.value) - value) <= tol * (1 + abs(value))
    assert float(rw.q.min()) >= 0.0 and abs(float(rw.q.sum()) - 1.0) <= 1e-12
    assert float(rw.divergence) <= rho + 1e-8
    # the optimistic value lies below the mean (the outer player cleans)
    assert float(rw.value) < float(r.mean())


def test_chi2_variance_identity_and_kl_form() -> None:
    r = 1.0 + torch.rand(50, generator=torch.Generator().manual_seed(1), dtype=F64)
    rho = 0.01  # small: no weight is clipped at 0
    rw = optimistic_weights(r, "chi2", rho)
    assert float(rw.q.min()) > 0
    expected = float(r.mean()) - math.sqrt(2 * rho * float(r.var(unbiased=False)))
    assert abs(float(rw.value) - expected) <= 1e-10
    q_closed = (1 - math.sqrt(2 * rho) * (r - r.mean()) / r.std(unbiased=False)) / r.numel()
    assert torch.allclose(rw.q, q_closed, atol=1e-12)
    kl = optimistic_weights(r, "kl", 0.05).q
    logq = torch.log(kl)  # q proportional to exp(-r / tau): log q affine in r with a negative slope
    slope = float(((logq - logq.mean()) * (r - r.mean())).sum() / ((r - r.mean()) ** 2).sum())
    assert slope < 0 and torch.allclose(logq, logq.mean() + slope * (r - r.mean()), atol=1e-9)


def test_cvar_outer_is_the_trimmed_mean() -> None:
    r = torch.randperm(30, generator=torch.Generator().manual_seed(0)).to(F64)
    rw = optimistic_weights(r, "cvar", 0.1)  # alpha = 0.9: the 27 smallest losses carry 1/27 each
    assert abs(float(rw.value) - float(torch.sort(r).values[:27].mean())) <= 1e-12
    assert int((rw.q > 1e-12).sum()) == 27
    assert isinstance(outer_ambiguity("cvar", 0.1), CVaR)


@pytest.mark.parametrize("outer", ["chi2", "kl", "cvar"])
def test_radius_zero_is_the_optimistic_phi_dro(outer: str) -> None:
    X, y, theta = _data(outliers=3)
    amb = outer_ambiguity(outer, 0.2)
    for loss, per in (("squared", (y - X @ theta) ** 2), ("absolute", (y - X @ theta).abs())):
        got = nested_linear_value(theta, X, y, outer=outer, rho=0.2, radius=0.0, loss=loss)
        ref = worst_case(-per, amb)
        assert abs(float(got.value) + float(ref.value)) <= 1e-12 * (1 + abs(float(ref.value)))
        assert torch.allclose(got.q, ref.q, atol=1e-14)


def test_rho_zero_is_plain_wdro() -> None:
    X, y, theta = _data(n=25)
    # p = 2, squared loss: the closed form equals the layer's exact type-2 worst case
    got = nested_linear_value(theta, X, y, outer="chi2", rho=0.0, radius=0.3)
    ref = wasserstein_worst_case(lambda z: (y - z @ theta) ** 2, X, 0.3, tol=1e-10)
    assert ref.status == "converged"
    assert abs(float(got.value) - ref.value) <= 1e-7 * ref.value
    assert torch.allclose(got.q, torch.full_like(got.q, 1 / 25), atol=1e-15)
    # p = 1, absolute loss: the empirical mean plus the exact type-1 penalty
    got1 = nested_linear_value(theta, X, y, outer="kl", rho=0.0, radius=0.3, loss="absolute")
    ref1 = (y - X @ theta).abs().mean() + linear_wasserstein_penalty(theta, 0.3)
    assert abs(float(got1.value) - float(ref1)) <= 1e-12


def test_inner_closed_form_with_optimistic_weights_matches_the_wasserstein_solver() -> None:
    X, y, theta = _data(n=30, outliers=2)
    nv = nested_linear_value(theta, X, y, outer="chi2", rho=0.1, radius=0.2)
    ref = wasserstein_worst_case(lambda z: (y - z @ theta) ** 2, X, 0.2, weights=nv.q, tol=1e-12)
    assert abs(float(nv.value) - ref.value) <= 1e-8 * ref.value


@pytest.mark.parametrize(("outer", "loss"), [("chi2", "squared"), ("kl", "absolute"), ("chi2", "huber")])
def test_nested_value_equals_the_exact_cvxpy_program(outer: str, loss: str) -> None:
    cp = pytest.importorskip("cvxpy")
    X, y, theta = _data(n=20, outliers=2, seed=4)
    rho, delta = 0.15, 0.25
    r = (y - X @ theta).numpy()
    n = len(r)
    q = cp.Variable(n, nonneg=True)
    div = cp.sum_squares(n * q - 1) / (2 * n) if outer == "chi2" else cp.sum(cp.rel_entr(q, 1.0 / n))
    tn = float(theta.norm())
    if loss == "squared":  # min_q (sqrt(q . r^2) + delta |theta|)^2: monotone, so minimise q . r^2
        obj = (r**2) @ q
    elif loss == "absolute":  # min_q q . |r| + delta |theta| (exact W1 worst case of a 1-Lipschitz loss)
        obj = abs(r) @ q + delta * tn
    else:
        h = [0.5 * v * v if abs(v) <= 1.35 else 1.35 * (abs(v) - 0.675) for v in r]
        obj = cp.hstack(h) @ q + delta * 1.35 * tn
    prob = cp.Problem(cp.Minimize(obj), [cp.sum(q) == 1, div <= rho])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    exact = (math.sqrt(prob.value) + delta * tn) ** 2 if loss == "squared" else prob.value
    got = nested_linear_value(theta, X, y, outer=outer, rho=rho, radius=delta, loss=loss)
    assert abs(float(got.value) - exact) <= 1e-6 * (1 + abs(exact))


def test_decoupling_weights_do_not_depend_on_the_transport_radius() -> None:
    X, y, theta = _data(outliers=4)
    qs = [nested_linear_value(theta, X, y, rho=0.1, radius=r, loss="absolute", p=1).q for r in (0.0, 0.5, 2)]
    assert all(torch.equal(qs[0], q) for q in qs[1:])
    qs2 = [nested_linear_value(theta, X, y, rho=0.1, radius=r).q for r in (0.0, 0.5, 2)]  # W2, squared
    assert all(torch.equal(qs2[0], q) for q in qs2[1:])


def _leverage_data(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    n, d = 200, 5
    theta = torch.randn(d, generator=g, dtype=F64)
    X = torch.randn(n, d, generator=g, dtype=F64)
    lev = torch.arange(10)
    sign = torch.where(lev % 2 == 0, 1.0, -1.0).to(F64)
    X[lev] = 0.1 * torch.randn(10, d, generator=g, dtype=F64)
    X[lev, 0] += 6.0 * sign
    y = X @ theta + torch.randn(n, generator=g, dtype=F64)
    out = torch.arange(10, 20)
    y[out] += 15.0 * torch.where(torch.rand(10, generator=g) < 0.5, 1.0, -1.0).to(F64)  # > 10 sigma
    return X, y, theta, lev, out


def test_outliers_lose_their_weight_and_leverage_points_keep_it() -> None:
    X, y, theta, lev, out = _leverage_data(0)
    reg = NestedDRORegressor(rho=0.1, radius=0.1).fit(X, y)
    n = 200
    assert reg.result_.status == "converged"
    assert float(reg.weights_[out].mean()) < 0.1 / n
    assert float(reg.weights_[lev].mean()) >= 0.8 / n
    # and the fit is far closer to theta* than least squares
    ols = torch.linalg.lstsq(torch.cat([X, torch.ones(n, 1, dtype=F64)], 1), y[:, None]).solution[:5, 0]
    assert float((reg.coef_ - theta).norm()) < 0.5 * float((ols - theta).norm())
    # the objective never increases over the alternation
    obj = reg.result_.history.metrics["objective"]
    assert all(b <= a + 1e-12 * abs(a) for a, b in itertools.pairwise(obj))


@pytest.mark.parametrize("loss", ["squared", "absolute", "huber"])
def test_parameter_step_is_the_exact_convex_minimiser(loss: str) -> None:
    """With rho = 0 one parameter step solves the WDRO problem; cvxpy gives the same value."""
    cp = pytest.importorskip("cvxpy")
    X, y, _ = _data(n=40, outliers=3, seed=2)
    delta = 0.2
    reg = NestedDRORegressor(loss=loss, rho=0.0, radius=delta).fit(X, y)
    w, b = cp.Variable(3), cp.Variable()
    r = y.numpy() - X.numpy() @ w - b
    if loss == "squared":
        obj = cp.norm(r, 2) / math.sqrt(40) + delta * cp.norm(w, 2)  # sqrt of the W2 value
        exact = None
    elif loss == "absolute":
        obj = cp.sum(cp.abs(r)) / 40 + delta * cp.norm(w, 2)
    else:
        obj = cp.sum(cp.huber(r, 1.35)) / 80 + delta * 1.35 * cp.norm(w, 2)  # cvxpy's huber is 2x ours
    prob = cp.Problem(cp.Minimize(obj))
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    exact = prob.value**2 if loss == "squared" else prob.value
    assert abs(reg.result_.value - exact) <= 1e-7 * (1 + exact)


def test_criterion_equals_the_closed_form_with_its_gradient() -> None:
    X, y, _ = _data(n=30, outliers=2)
    model = torch.nn.Linear(3, 1, bias=False).double()
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.4, -0.3, 0.2]], dtype=F64))
    gamma, delta = 4.0, 0.3
    crit = NestedDRO("chi2", 0.1, radius=delta, gamma=gamma, inner_steps=500)
    loss, q = crit(lambda out, t: (out[:, 0] - t) ** 2, model, X, y)
    loss.backward()
    th = model.weight.detach().reshape(-1).clone().requires_grad_(True)
    phi = gamma * (y - X @ th) ** 2 / (gamma - (th * th).sum())  # phi_gamma of the squared loss
    ref = optimistic_weights(phi, "chi2", 0.1)
    f = ref.value + gamma * delta**2
    (g,) = torch.autograd.grad(f, th)
    assert abs(float(loss.detach()) - float(f.detach())) <= 1e-10 * float(f.detach())
    assert torch.allclose(q, ref.q, atol=1e-10)
    assert torch.allclose(model.weight.grad.reshape(-1), g, atol=1e-8)


def test_criterion_limits_radius_zero_and_exact_w1() -> None:
    X, y, _ = _data(n=30, outliers=2)
    model = torch.nn.Linear(3, 1).double()
    fn = lambda out, t: (out[:, 0] - t).abs()  # noqa: E731
    th, b = model.weight.detach().reshape(-1), model.bias.detach()[0]
    l0, _ = NestedDRO("kl", 0.1, radius=0.0)(fn, model, X, y)
    ref0 = nested_linear_value(th, X, y, intercept=b, outer="kl", rho=0.1, radius=0.0, loss="absolute")
    assert abs(float(l0.detach()) - float(ref0.value)) <= 1e-12
    l1, _ = NestedDRO("kl", 0.1, radius=0.4, p=1)(fn, model, X, y)
    ref1 = nested_linear_value(th, X, y, intercept=b, outer="kl", rho=0.1, radius=0.4, loss="absolute", p=1)
    assert abs(float(l1.detach()) - float(ref1.value)) <= 1e-12


def test_fit_with_adaptive_gamma_meets_the_transport_budget() -> None:
    X, y, _ = _data(n=40, outliers=2)
    model = torch.nn.Linear(3, 1, bias=False).double()
    torch.nn.init.zeros_(model.weight)
    crit = NestedDRO("chi2", 0.1, radius=0.3, gamma0=2.0, gamma_lr=20.0, inner_steps=10)
    res = nested_dro_fit(model, X, y, crit, lr=0.05, epochs=60, tol=1e-9)
    assert res.status == "max_iter" and res.n_iter == 60
    assert abs(res.extras["transport_cost"] - 0.09) <= 0.002  # the budget delta^2 (measured 0.09005)
    assert float(res.extras["weights"].sum()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: optimistic_weights(torch.ones(3), "chi2", -0.1), "rho"),
        (lambda: optimistic_weights(torch.ones(3), "tv", 0.1), "outer"),
        (lambda: optimistic_weights(torch.ones(0), "chi2", 0.1), "losses"),
        (lambda: NestedDRORegressor(radius=-1.0), "radius"),
        (lambda: NestedDRORegressor(outer="hellinger"), "outer"),
        (lambda: NestedDRORegressor(loss="squared", p=1), "p"),
        (lambda: NestedDRORegressor().fit(torch.ones(0, 3, dtype=F64), torch.ones(0, dtype=F64)), "X"),
        (lambda: NestedDRO(radius=-0.1), "radius"),
        (lambda: NestedDRO(rho=-1.0), "rho"),
        (lambda: NestedDRO("cvar", 1.0), "rho"),
        (
            lambda: nested_linear_value(torch.ones(2, dtype=F64), torch.ones(3, 2, dtype=F64), torch.ones(2)),
            "y",
        ),
    ],
)
def test_bad_input(call: object, name: str) -> None:
    with pytest.raises((ValueError, TypeError)) as err:
        call()  # type: ignore[operator]
    assert str(err.value).startswith(name)


def test_ambiguity_types() -> None:
    assert isinstance(outer_ambiguity("chi2", 0.1), ChiSquare) and isinstance(outer_ambiguity("kl", 0.1), KL)
