"""Tests for optarium.convex.qp: optimality certificates, cvxpy agreement, gradients, batching, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from optarium.convex import QPSolution, capped_qp, simplex_qp

torch.set_num_threads(1)
F64 = torch.float64


def _spd(n, batch=(), seed=0, ridge=0.1):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*batch, n, n, generator=g, dtype=F64)
    return A @ A.transpose(-1, -2) / n + ridge * torch.eye(n, dtype=F64)


def _case(kind, n=6, seed=0):
    """(Q, a, b, c, u) of a feasible instance of each constraint pattern."""
    g = torch.Generator().manual_seed(100 + seed)
    Q = _spd(n, seed=seed)
    if kind == "simplex":
        return (
            Q,
            torch.ones(n, dtype=F64),
            torch.tensor(1.0, dtype=F64),
            torch.zeros(n, dtype=F64),
            torch.ones(n, dtype=F64),
        )
    if kind == "box":
        u = 0.1 + 0.4 * torch.rand(n, generator=g, dtype=F64)
        return Q, torch.ones(n, dtype=F64), torch.tensor(1.0, dtype=F64), torch.zeros(n, dtype=F64), u
    # proportional caps with a return row (the homogenised max-Sharpe layer)
    mu = 0.2 + torch.rand(n, generator=g, dtype=F64)
    c = 0.2 + 0.5 * torch.rand(n, generator=g, dtype=F64)
    return Q, mu, torch.tensor(1.0, dtype=F64), c, torch.zeros(n, dtype=F64)


def _lp_gap(Q, a, b, c, u, x):
    """max over feasible y of <Qx, x - y>: zero iff x is optimal (first-order condition of a convex QP)."""
    from scipy.optimize import linprog

    n = x.shape[-1]
    grad = (Q @ x).numpy()
    A_ub = np.eye(n) - np.outer(c.numpy(), np.ones(n))
    A_eq = a.numpy()[None]
    res = linprog(
        grad, A_ub=A_ub, b_ub=u.numpy(), A_eq=A_eq, b_eq=[float(b)], bounds=[(0, None)] * n, method="highs"
    )
    assert res.status == 0
    return float(grad @ x.numpy() - res.fun)


@pytest.mark.parametrize("kind", ["simplex", "box", "proportional"])
def test_feasible_and_first_order_optimal(kind, seed):
    Q, a, b, c, u = _case(kind, seed=seed)
    sol = capped_qp(Q, a, b, c, u)
    x = sol.x
    assert isinstance(sol, QPSolution) and bool(sol.polished)
    assert abs(float(a @ x - b)) <= 1e-12
    assert float(x.min()) >= -1e-12
    assert float((x - c * x.sum() - u).max()) <= 1e-12
    assert _lp_gap(Q, a, b, c, u, x) <= 1e-10
    assert float(sol.kkt_residual) <= 1e-10


@pytest.mark.parametrize("kind", ["simplex", "box", "proportional"])
def test_agrees_with_cvxpy(kind):
    cp = pytest.importorskip("cvxpy", reason="cvxpy is the independent QP reference")
    Q, a, b, c, u = _case(kind, seed=3)
    n = Q.shape[-1]
    x = cp.Variable(n)
    cons = [a.numpy() @ x == float(b), x >= 0, x <= c.numpy() * cp.sum(x) + u.numpy()]
    prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, cp.psd_wrap(Q.numpy()))), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    sol = capped_qp(Q, a, b, c, u)
    assert float((sol.x - torch.as_tensor(x.value)).abs().max()) < 1e-7


def test_simplex_qp_is_the_min_norm_point_of_a_hull():
    # Rows of J: three gradients; the min-norm point of their hull, by cvxpy-free enumeration of faces.
    J = torch.tensor([[1.0, 0.2], [0.1, 1.0], [-0.5, 0.8]], dtype=F64)
    sol = simplex_qp(J @ J.T)
    lam = sol.x
    d = lam @ J
    # Optimality on the simplex: every gradient has <g_k, d> >= |d|^2, with equality on the support.
    prods = J @ d
    assert float((prods - d @ d).min()) >= -1e-12
    assert float(((prods - d @ d) * lam).abs().max()) <= 1e-12


def test_capped_simplex_respects_the_upper_bounds():
    Q = _spd(5, seed=4)
    up = torch.tensor([0.1, 0.5, 0.5, 0.3, 0.2], dtype=F64)
    sol = simplex_qp(Q, up)
    assert float((sol.x - up).max()) <= 1e-12 and abs(float(sol.x.sum()) - 1) <= 1e-12
    assert (
        _lp_gap(
            Q, torch.ones(5, dtype=F64), torch.tensor(1.0, dtype=F64), torch.zeros(5, dtype=F64), up, sol.x
        )
        <= 1e-10
    )


@pytest.mark.parametrize("kind", ["box", "proportional"])
def test_gradcheck_float64(kind):
    Q, a, b, c, u = _case(kind, n=4, seed=5)
    L = torch.linalg.cholesky(Q).requires_grad_(True)
    a = a.clone().requires_grad_(True)
    c = c.clone().requires_grad_(True)
    u = u.clone().requires_grad_(True)

    def fn(L, a, c, u):
        return capped_qp(L @ L.T, a, b, c, u).x

    assert torch.autograd.gradcheck(fn, (L, a, c, u), eps=1e-6, atol=1e-6)


def test_gradient_matches_cvxpylayers():
    pytest.importorskip("cvxpylayers", reason="cvxpylayers is the independent reference for QP gradients")
    import cvxpy as cp
    from cvxpylayers.torch import CvxpyLayer

    Q, a, b, c, u = _case("box", n=4, seed=6)
    n = 4
    Lp = cp.Parameter((n, n))
    up = cp.Parameter(n)
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(Lp.T @ x)), [cp.sum(x) == 1, x >= 0, x <= up])
    layer = CvxpyLayer(prob, parameters=[Lp, up], variables=[x])
    L = torch.linalg.cholesky(Q).requires_grad_(True)
    uu = u.clone().requires_grad_(True)
    w = torch.linspace(-1, 1, n, dtype=F64)
    (xr,) = layer(L, uu, solver_args={"solve_method": "Clarabel", "tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12,
                                      "tol_feas": 1e-12})  # fmt: skip
    gr = torch.autograd.grad((xr * w).sum(), (L, uu))
    xo = capped_qp(L @ L.T, a, b, c, uu).x
    go = torch.autograd.grad((xo * w).sum(), (L, uu))
    assert float((xo - xr).abs().max()) < 1e-6
    for g1, g2 in zip(go, gr, strict=True):
        assert float((g1 - g2).abs().max()) < 1e-5


def test_batched_equals_per_problem_and_broadcasts():
    Q = _spd(5, batch=(2, 3), seed=7)
    u = torch.full((5,), 0.4, dtype=F64)
    sol = simplex_qp(Q, u)
    assert sol.x.shape == (2, 3, 5) and sol.polished.shape == (2, 3) and sol.kkt_residual.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            assert torch.allclose(sol.x[i, j], simplex_qp(Q[i, j], u).x, atol=1e-12)


def test_fixed_variables_are_zero_and_others_reoptimised():
    Q, a, b, c, u = _case("simplex", n=5, seed=8)
    fixed = torch.tensor([True, False, False, True, False])
    sol = capped_qp(Q, a, b, c, u, fixed=fixed)
    assert float(sol.x[fixed].abs().max()) == 0.0
    keep = ~fixed
    sub = simplex_qp(Q[keep][:, keep])
    assert torch.allclose(sol.x[keep], sub.x, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_follows_the_inputs(dtype):
    Q = _spd(4, seed=9).to(dtype)
    sol = simplex_qp(Q, tol=1e-5 if dtype == torch.float32 else 1e-10)
    assert sol.x.dtype == dtype and sol.kkt_residual.dtype == dtype and sol.x.device == Q.device
    assert abs(float(sol.x.sum()) - 1) < (1e-5 if dtype == torch.float32 else 1e-12)


@pytest.mark.gpu
def test_runs_on_cuda():
    Q = _spd(4, seed=10)
    sol = simplex_qp(Q.cuda())
    assert sol.x.device.type == "cuda"
    assert torch.allclose(sol.x.cpu(), simplex_qp(Q).x, atol=1e-10)


def test_bad_input_names_the_argument():
    Q, a, b, c, u = _case("box", n=3)
    cases = [
        (lambda: capped_qp(Q.numpy(), a, b, c, u), TypeError, "Q"),
        (lambda: capped_qp(Q[:, :2], a, b, c, u), ValueError, "Q"),
        (lambda: capped_qp(Q + torch.triu(torch.ones_like(Q), 1), a, b, c, u), ValueError, "Q"),
        (lambda: capped_qp(Q, a[:2], b, c, u), ValueError, "a"),
        (lambda: capped_qp(Q, a, b.float(), c, u), TypeError, "b"),
        (lambda: capped_qp(Q, a, b, c * float("nan"), u), ValueError, "c"),
        (lambda: capped_qp(Q, a, b, c, u, fixed=torch.zeros(3)), TypeError, "fixed"),
        (lambda: capped_qp(Q, a, b, c, u, tol=0.0), ValueError, "tol"),
        (lambda: capped_qp(Q, a, b, c, u, max_iter=0), ValueError, "max_iter"),
        (lambda: capped_qp(Q, a, b, c, u, isolate_rejected=1), TypeError, "isolate_rejected"),
        (lambda: simplex_qp(Q, torch.full((3,), 0.2, dtype=F64)), ValueError, "upper"),
    ]
    for fn, exc, name in cases:
        with pytest.raises(exc) as info:
            fn()
        assert str(info.value).startswith(name), (name, str(info.value))


def test_degenerate_active_set_falls_back_to_the_implicit_interior_point():
    # Caps summing to exactly 1 force x = u with n + 1 active rows: the polish's KKT system is singular.
    L = torch.linalg.cholesky(_spd(4, seed=11)).requires_grad_(True)
    u = torch.full((4,), 0.25, dtype=F64)
    sol = simplex_qp(L @ L.T, u)
    assert not bool(sol.polished)
    assert float((sol.x - u).abs().max()) <= 1e-9
    # x does not depend on Q here: the implicit (one Newton step) gradient must vanish.
    (g,) = torch.autograd.grad((sol.x * torch.arange(4, dtype=F64)).sum(), L)
    assert float(g.abs().max()) <= 1e-9
    # The portfolio layer's original mixing (isolate_rejected=False) gives the same values.
    ones, zeros = torch.ones(4, dtype=F64), torch.zeros(4, dtype=F64)
    mixed = capped_qp(
        L.detach() @ L.detach().T, ones, torch.tensor(1.0, dtype=F64), zeros, u, isolate_rejected=False
    )
    assert torch.equal(mixed.x, sol.x.detach())
