"""min over parameters of the worst case: against cvxpy's robust logistic regression and the ERM limit."""

from __future__ import annotations

import pytest
import torch

from optarium.dro import KL, ChiSquare, CVaR, Wasserstein, minimize_worst_case


def _data(n: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 2, generator=g, dtype=torch.float64)
    y = torch.sign(
        X @ torch.tensor([1.0, -1.0], dtype=torch.float64)
        + 0.8 * torch.randn(n, generator=g, dtype=torch.float64)
    )
    return X, y


def test_kl_robust_logistic_regression_matches_cvxpy() -> None:
    cp = pytest.importorskip("cvxpy", reason="cvxpy is the exact reference (experiments extra)")
    X, y = _data()
    rho, reg = 0.2, 0.05

    def loss(w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(-y * (X @ w)) + reg * (w * w).sum()

    res = minimize_worst_case(
        loss, torch.full((2,), 0.1, dtype=torch.float64), KL(rho), tol=1e-8, max_iter=3000
    )
    assert res.status == "converged"
    # the KL worst case through its dual, min over (w, lam > 0, t) of lam rho + t subject to
    # lam log mean exp((l_i(w) - t) / lam) <= 0, as exponential cones
    # lam exp(v_i / lam) <= s_i with v_i >= l_i - t
    w, lam, t = cp.Variable(2), cp.Variable(pos=True), cp.Variable()
    v, s = cp.Variable(40), cp.Variable(40)
    li = cp.logistic(-cp.multiply(y.numpy(), X.numpy() @ w)) + reg * cp.sum_squares(w)
    cons = [li - t <= v, cp.constraints.ExpCone(v, cp.hstack([lam] * 40), s), cp.sum(s) <= 40 * lam]
    problem = cp.Problem(cp.Minimize(lam * rho + t), cons)
    problem.solve(solver="CLARABEL")
    assert res.value == pytest.approx(float(problem.value), abs=1e-6)


def test_cvar_one_is_erm_and_robust_value_exceeds_nominal() -> None:
    X, y = _data(seed=1)

    def loss(w: torch.Tensor) -> torch.Tensor:
        return (X @ w - y) ** 2

    res = minimize_worst_case(loss, torch.zeros(2, dtype=torch.float64), CVaR(1.0), tol=1e-9, max_iter=500)
    w_ls = torch.linalg.lstsq(X, y[:, None]).solution[:, 0]
    assert torch.allclose(res.x, w_ls, atol=1e-8)
    rob = minimize_worst_case(loss, torch.zeros(2, dtype=torch.float64), ChiSquare(0.5), max_iter=40)
    assert rob.value >= rob.extras["nominal_value"]
    assert rob.extras["line_search_failures"] >= 0


def test_refuses_wasserstein_and_bad_arguments() -> None:
    X, y = _data()

    def loss(w: torch.Tensor) -> torch.Tensor:
        return (X @ w - y) ** 2

    x0 = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"^ambiguity"):
        minimize_worst_case(loss, x0, Wasserstein(0.1))
    with pytest.raises(TypeError, match=r"^x0"):
        minimize_worst_case(loss, [0.0, 0.0], KL(0.1))
    with pytest.raises(ValueError, match=r"^lr"):
        minimize_worst_case(loss, x0, KL(0.1), lr=-1.0)
    with pytest.raises(ValueError, match=r"^loss"):
        minimize_worst_case(lambda w: (X @ w).sum(), x0, KL(0.1))
