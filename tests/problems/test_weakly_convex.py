"""Moreau-envelope measure and the weakly convex problems (spec test 2, problem checks)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import torch

from optarium.problems.weakly_convex import (
    NonconvexLeastSquares,
    RobustPhaseRetrieval,
    moreau_grad_norm,
    prox_by_gradient_descent,
    soft_threshold,
)


def test_moreau_gradient_of_abs_is_huber_gradient() -> None:
    x = torch.linspace(-3, 3, 601, dtype=torch.float64).view(-1, 1)
    for lam in (0.1, 0.5, 2.0):
        got = moreau_grad_norm(x, lam, lambda z, lam=lam: soft_threshold(z, lam))
        huber = torch.clamp(x.abs() / lam, max=1.0).view(-1)  # |d/dx Huber_lam(x)|
        torch.testing.assert_close(got, huber, rtol=0, atol=1e-12)


def test_moreau_gradient_of_quadratic_by_gradient_descent_matches_closed_form(seed: int) -> None:
    d = 6
    q = torch.randn(d, d, dtype=torch.float64)
    h = q @ q.T / d + 0.1 * torch.eye(d, dtype=torch.float64)
    x = torch.randn(5, d, dtype=torch.float64)
    lam = 0.7
    prox = prox_by_gradient_descent(lambda y: y @ h, x, lam, smoothness=float(torch.linalg.eigvalsh(h)[-1]),
                                     steps=400)  # fmt: skip
    grad = (x - prox) / lam
    closed = torch.linalg.solve(torch.eye(d, dtype=torch.float64) + lam * h, (h @ x.T)).T
    torch.testing.assert_close(grad, closed, rtol=0, atol=1e-8)


def test_problem1_constants_and_prox_against_scipy() -> None:
    p = NonconvexLeastSquares.make()
    # rho = alpha / 2: phi + (rho/2)||x||^2 has a PSD Hessian at the worst point (|x_j| = 1) ...
    x = torch.ones(p.dim, dtype=torch.float64)
    hess = torch.autograd.functional.hessian(lambda z: p.value(z), x)
    assert float(torch.linalg.eigvalsh(hess + p.rho * torch.eye(p.dim, dtype=torch.float64))[0]) >= -1e-10
    # ... and the gradient is the autograd gradient, smoothness bounds the Hessian at 0
    z = torch.randn(4, p.dim, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(p.value(z).sum(), z)
    torch.testing.assert_close(p.grad(z.detach()), g, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(p.fast_grad()(z.detach()), g, rtol=1e-10, atol=1e-12)
    h0 = torch.autograd.functional.hessian(lambda v: p.value(v), torch.zeros(p.dim, dtype=torch.float64))
    assert float(torch.linalg.eigvalsh(h0)[-1]) <= p.smoothness + 1e-12
    # the prox at x0 = 0 against an independent high-accuracy solve
    lam, x0 = 0.5, np.zeros(p.dim)

    def f(y: np.ndarray) -> tuple[float, np.ndarray]:
        t = torch.tensor(y, requires_grad=True)
        v = p.value(t) + ((t - torch.from_numpy(x0)) ** 2).sum() / (2 * lam)
        v.backward()
        return float(v.detach()), t.grad.numpy()

    ref = scipy.optimize.minimize(f, x0, jac=True, method="BFGS", options={"gtol": 1e-13}).x
    ours = p.prox(torch.zeros(p.dim, dtype=torch.float64), lam)
    np.testing.assert_allclose(ours.numpy(), ref, atol=1e-8)
    norm0 = float(p.moreau_grad_norm(torch.zeros(p.dim, dtype=torch.float64)))
    assert norm0 == pytest.approx(np.linalg.norm(ref) / lam, rel=1e-7)
    with pytest.raises(ValueError, match="lam"):
        p.moreau_grad_norm(torch.zeros(p.dim, dtype=torch.float64), lam=5.0)  # lam >= 1/rho


def test_phase_retrieval_subgradient_rho_and_polyak_recovery() -> None:
    q = RobustPhaseRetrieval.make(m=200, d=10)
    assert int(q.outliers.sum()) == 20
    x = torch.randn(3, q.dim, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(q.value(x).sum(), x)
    torch.testing.assert_close(q.subgrad(x.detach()), g, rtol=1e-12, atol=1e-12)  # smooth a.e.
    # weak convexity: phi(y) >= phi(x) + <v, y - x> - rho/2 ||y - x||^2 at random pairs
    y = torch.randn(3, q.dim, dtype=torch.float64) * 2
    lhs = q.value(y)
    rhs = q.value(x.detach()) + (q.subgrad(x.detach()) * (y - x.detach())).sum(-1)
    assert bool((lhs >= rhs - q.rho / 2 * ((y - x.detach()) ** 2).sum(-1) - 1e-10).all())
    starts = torch.stack([q.start(0.3, seed=s) for s in range(3)])
    torch.testing.assert_close(q.distance(starts), torch.full((3,), 0.3, dtype=torch.float64))
    torch.testing.assert_close(q.distance(-q.x_signal.view(1, -1)), torch.zeros(1, dtype=torch.float64))
    assert float(q.distance(q.polyak_run(starts, 600)).max()) <= 1e-6
