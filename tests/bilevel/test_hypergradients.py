"""The hypergradient estimators against closed forms, torchopt 0.7.3 and torch.func (float64)."""

from __future__ import annotations

import warnings

import pytest
import torch

from optarium.bilevel.hypergradients import (
    bilevel_solve,
    conjugate_gradient,
    hypergradient,
    neumann_series,
    ridge_problem,
    soba_step,
    stocbio_hypergradient,
    unrolled_hypergradient,
)

F64 = torch.float64


def _ridge(seed: int = 0, d: int = 5):
    problem, train, val = ridge_problem(F64, "cpu", seed, n=60, n_val=40, d=d)
    v = torch.linspace(-1.0, 0.5, d, dtype=F64)
    return problem, train, val, v


def _theta_star(v, train):
    X, y = train
    n = X.shape[0]
    return torch.linalg.solve(X.T @ X / n + torch.diag(torch.exp(v)), X.T @ y / n)


def _closed_form(v, train, val):
    """∇Φ(v) = −e^v ⊙ θ* ⊙ (A + D)^{-1} ∇_θ f, A = XᵀX/n, D = diag(e^v)."""
    X, _ = train
    Xv, yv = val
    n = X.shape[0]
    th = _theta_star(v, train)
    gf = Xv.T @ (Xv @ th - yv) / Xv.shape[0]
    u = torch.linalg.solve(X.T @ X / n + torch.diag(torch.exp(v)), gf)
    return -torch.exp(v) * th * u


def test_closed_form_matches_autograd_through_the_solve() -> None:
    _, train, val, v = _ridge()
    vv = v.clone().requires_grad_(True)
    Xv, yv = val
    (g,) = torch.autograd.grad(0.5 * ((Xv @ _theta_star(vv, train) - yv) ** 2).mean(), vv)
    torch.testing.assert_close(g, _closed_form(v, train, val), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("method", ["cg", "exact"])
def test_aid_equals_closed_form(method: str) -> None:
    problem, train, val, v = _ridge()
    th = _theta_star(v, train)
    h = hypergradient(problem, v, th, train, val, method=method, steps=50, tol=1e-14)
    torch.testing.assert_close(h, _closed_form(v, train, val), rtol=1e-10, atol=1e-13)


def test_cg_equals_torchopt_implicit_differentiation() -> None:
    """torchopt.diff.implicit.custom_root with its CG solve, on the same ridge problem, to 1e-8."""
    torchopt = pytest.importorskip("torchopt")
    problem, train, val, v = _ridge()
    X, y = train
    Xv, yv = val
    n = X.shape[0]

    def stationarity(theta, vv):
        return X.T @ (X @ theta - y) / n + torch.exp(vv) * theta

    solve_cg = torchopt.linear_solve.solve_cg(maxiter=50, rtol=1e-14, atol=0.0)

    @torchopt.diff.implicit.custom_root(stationarity, argnums=1, solve=solve_cg)
    def inner_solution(theta, vv):
        with torch.no_grad():
            return _theta_star(vv.detach(), train)

    vv = v.clone().requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torchopt calls functorch.vjp
        th = inner_solution(torch.zeros(5, dtype=F64), vv)
        (ref,) = torch.autograd.grad(0.5 * ((Xv @ th - yv) ** 2).mean(), vv)
    ours = hypergradient(problem, v, _theta_star(v, train), train, val, method="cg", steps=50, tol=1e-14)
    closed = _closed_form(v, train, val)
    torch.testing.assert_close(ours, ref, rtol=1e-8, atol=1e-12)
    torch.testing.assert_close(ref, closed, rtol=1e-8, atol=1e-12)


def test_conjugate_gradient_and_neumann_solve_spd_systems() -> None:
    g = torch.Generator().manual_seed(0)
    M = torch.randn(8, 8, generator=g, dtype=F64)
    A = M @ M.T / 8 + 0.5 * torch.eye(8, dtype=F64)
    b = torch.randn(8, generator=g, dtype=F64)
    exact = torch.linalg.solve(A, b)
    torch.testing.assert_close(conjugate_gradient(lambda x: A @ x, b, steps=8), exact, rtol=1e-9, atol=1e-10)
    # x0 warm start at the solution stays there
    torch.testing.assert_close(conjugate_gradient(lambda x: A @ x, b, steps=3, x0=exact), exact)
    eta = 1.0 / float(torch.linalg.eigvalsh(A).max())
    approx = neumann_series(lambda x: A @ x, b, steps=2000, eta=eta)
    torch.testing.assert_close(approx, exact, rtol=1e-8, atol=1e-9)
    # few terms are not enough: the truncation error is what the method trades
    assert float((neumann_series(lambda x: A @ x, b, steps=3, eta=eta) - exact).norm()) > 1e-3


def test_neumann_hypergradient_converges_and_stocbio_with_full_batches_equals_it() -> None:
    problem, train, val, v = _ridge()
    th = _theta_star(v, train)
    h = hypergradient(problem, v, th, train, val, method="neumann", steps=400)
    torch.testing.assert_close(h, _closed_form(v, train, val), rtol=1e-7, atol=1e-10)
    h20 = hypergradient(problem, v, th, train, val, method="neumann", steps=20, eta=0.3)
    hs = stocbio_hypergradient(problem, v, th, [train] * 20, val, eta=0.3)
    torch.testing.assert_close(hs, h20, rtol=1e-12, atol=1e-14)


def _functional_unroll(problem, v, theta0, batches, val, lr):
    """The same T SGD steps written with torch.func.grad, differentiated with torch.func.grad in v."""

    def phi(vv):
        th = theta0
        for batch in batches:
            th = th - lr * torch.func.grad(lambda t, b=batch: problem.inner_loss(vv, t, b))(th)
        return problem.outer(vv, th, val)

    return torch.func.grad(phi)(v)


def test_unrolling_agrees_with_torch_func_through_the_loop() -> None:
    problem, train, val, v = _ridge()
    g = torch.Generator().manual_seed(3)
    idx = [torch.randperm(60, generator=g)[:16] for _ in range(12)]
    batches = [tuple(t[i] for t in train) for i in idx]
    th0 = torch.zeros(5, dtype=F64)
    h, thT = unrolled_hypergradient(problem, v, th0, batches, val, lr=0.3)
    ref = _functional_unroll(problem, v, th0, batches, val, 0.3)
    torch.testing.assert_close(h, ref, rtol=1e-10, atol=1e-13)
    # truncation to K = T is the full unroll; K = 0 keeps only the direct gradient (zero here)
    hT, _ = unrolled_hypergradient(problem, v, th0, batches, val, lr=0.3, truncate=12)
    torch.testing.assert_close(hT, h)
    h0, th0T = unrolled_hypergradient(problem, v, th0, batches, val, lr=0.3, truncate=0)
    assert float(h0.abs().max()) == 0.0
    torch.testing.assert_close(th0T, thT)
    # truncated back-prop over the last K steps equals torch.func through those K steps from θ_{T−K}
    hk, _ = unrolled_hypergradient(problem, v, th0, batches, val, lr=0.3, truncate=4)
    _, th_mid = unrolled_hypergradient(problem, v, th0, batches[:8], val, lr=0.3)
    torch.testing.assert_close(
        hk, _functional_unroll(problem, v, th_mid, batches[8:], val, 0.3), rtol=1e-10, atol=1e-13
    )


def test_long_unroll_approaches_the_implicit_hypergradient() -> None:
    problem, train, val, v = _ridge()
    h, _ = unrolled_hypergradient(problem, v, torch.zeros(5, dtype=F64), [train] * 300, val, lr=0.4)
    torch.testing.assert_close(h, _closed_form(v, train, val), rtol=1e-6, atol=1e-9)


def test_soba_z_converges_to_the_linear_system_solution_at_fixed_theta() -> None:
    problem, train, val, v = _ridge()
    th = _theta_star(v, train)
    z = torch.zeros(5, dtype=F64)
    for _ in range(400):
        th_new, z, h = soba_step(problem, v, th, z, train, train, val, inner_lr=0.3, z_lr=0.4)
    torch.testing.assert_close(th_new, th, rtol=1e-10, atol=1e-10)  # θ* is a fixed point of the θ step
    torch.testing.assert_close(h, _closed_form(v, train, val), rtol=1e-8, atol=1e-11)


@pytest.mark.parametrize("estimator", ["cg", "itd"])
def test_bilevel_solve_reaches_a_stationary_point_of_the_value_function(estimator: str) -> None:
    problem, train, val, _ = _ridge(d=3)
    res = bilevel_solve(
        problem,
        torch.zeros(3, dtype=F64),
        torch.zeros(3, dtype=F64),
        train,
        val,
        estimator=estimator,
        outer_steps=60,
        inner_steps=10,
        inner_lr=0.4,
        batch_size=60,
        outer_optimizer=lambda p: torch.optim.SGD(p, lr=4.0),
    )
    v = res.x.clone().requires_grad_(True)
    Xv, yv = val
    (g,) = torch.autograd.grad(0.5 * ((Xv @ _theta_star(v, train) - yv) ** 2).mean(), v)
    g0 = _closed_form(torch.zeros(3, dtype=F64), train, val)
    assert float(g.norm()) < 0.1 * float(g0.norm())
    assert res.history.metrics["objective"][-1] < res.history.metrics["objective"][0]
    assert res.extras["work"]["post:mixed_backwards" if estimator == "cg" else "post:sample_grads"] > 0


def test_bad_input_is_refused_by_name() -> None:
    problem, train, val, v = _ridge()
    th = torch.zeros(5, dtype=F64)
    with pytest.raises(ValueError, match=r"^method"):
        hypergradient(problem, v, th, train, val, method="bad")
    with pytest.raises(ValueError, match=r"^damping"):
        hypergradient(problem, v, th, train, val, damping=-1.0)
    with pytest.raises(ValueError, match=r"^eta"):
        neumann_series(lambda x: x, th, steps=2, eta=0.0)
    with pytest.raises(ValueError, match=r"^hvp_batches"):
        stocbio_hypergradient(problem, v, th, [], val, eta=0.1)
    with pytest.raises(ValueError, match=r"^eta"):
        bilevel_solve(problem, v, th, train, val, estimator="stocbio")
    with pytest.raises(ValueError, match=r"^lr"):
        unrolled_hypergradient(problem, v, th, [train], val, lr=-1.0)
