"""optarium.sparse.lasso: FISTA against scikit-learn's Lasso / LassoCV, optimality, statuses, bad input."""

from __future__ import annotations

import pickle

import pytest
import torch

from optarium.sparse import lasso, lasso_cv, lasso_kkt_residual, lasso_objective, lasso_path, soft_threshold
from optarium.sparse.lasso import solver_cases

sklearn_linear = pytest.importorskip("sklearn.linear_model", reason="scikit-learn is the Lasso reference")


def _problem(n: int = 60, d: int = 12, seed: int = 0, dtype: torch.dtype = torch.float64):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.zeros(d, dtype=torch.float64)
    w[:3] = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    y = X @ w + 0.3 * torch.randn(n, generator=g, dtype=torch.float64)
    return X.to(dtype), y.to(dtype)


def _sk_lasso(X: torch.Tensor, y: torch.Tensor, alpha: float):
    m = sklearn_linear.Lasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=100_000)
    return torch.as_tensor(m.fit(X.numpy(), y.numpy()).coef_, dtype=torch.float64)


def test_soft_threshold_is_the_l1_prox() -> None:
    v = torch.tensor([-3.0, -0.5, 0.0, 0.2, 2.0], dtype=torch.float64)
    assert soft_threshold(v, 1.0).tolist() == [-2.0, -0.0, 0.0, 0.0, 1.0]
    # prox property: argmin_u 0.5 (u - v)^2 + tau |u| on a fine grid
    grid = torch.linspace(-4, 4, 80001, dtype=torch.float64)
    for vi in v:
        best = grid[torch.argmin(0.5 * (grid - vi) ** 2 + 0.7 * grid.abs())]
        assert float(soft_threshold(vi, 0.7)) == pytest.approx(float(best), abs=1e-4)


@pytest.mark.parametrize("alpha", [0.01, 0.1, 0.5])
def test_matches_scikit_learn_lasso(alpha: float) -> None:
    X, y = _problem()
    res = lasso(X, y, alpha, max_iter=20_000, tol=1e-13)
    assert res.status == "converged"
    ref = _sk_lasso(X, y, alpha)
    torch.testing.assert_close(res.x, ref, rtol=0, atol=1e-8)
    assert res.value == pytest.approx(float(lasso_objective(X, y, ref, alpha)), rel=1e-10)
    assert res.extras["kkt_residual"] < 1e-9
    assert lasso_kkt_residual(X, y, ref, alpha) < 1e-8  # the residual is 0 at scikit-learn's solution too


def test_large_penalty_gives_zero_and_path_rows_are_the_single_solves() -> None:
    X, y = _problem(seed=1)
    alpha_max = float((X.T @ y).abs().max()) / X.shape[0]  # the smallest alpha with w = 0
    res = lasso(X, y, 1.01 * alpha_max, max_iter=100)
    assert torch.equal(res.x, torch.zeros_like(res.x)) and res.status == "converged"
    assert float(lasso(X, y, 0.9 * alpha_max, max_iter=2000).x.abs().max()) > 0
    alphas = torch.tensor([0.02, 0.2], dtype=torch.float64)
    W = lasso_path(X, y, alphas, 20_000, tol=1e-13)
    for i, a in enumerate(alphas.tolist()):
        torch.testing.assert_close(W[i], _sk_lasso(X, y, a), rtol=0, atol=1e-8)
    # one penalty: lasso's iterates are lasso_path's, bit for bit, for the same number of iterations
    single = lasso(X, y, 0.2, max_iter=37, tol=0.0)
    assert single.status == "max_iter" and single.n_iter == 37
    assert torch.equal(single.x, lasso_path(X, y, alphas[1:], 37, tol=0.0)[0])


def test_lasso_cv_matches_scikit_learn_lasso_cv_on_the_same_folds() -> None:
    X, y = _problem(n=50, d=10, seed=2)
    alphas = torch.logspace(-2, 0, 9, dtype=torch.float64)
    res = lasso_cv(X, y, alphas, 20_000, tol=1e-13)
    fold = torch.arange(50) % 5
    splits = [
        (torch.nonzero(fold != k).squeeze(1).numpy(), torch.nonzero(fold == k).squeeze(1).numpy())
        for k in range(5)
    ]
    ref = sklearn_linear.LassoCV(
        alphas=alphas.numpy(), cv=splits, fit_intercept=False, tol=1e-14, max_iter=100_000
    )
    ref.fit(X.numpy(), y.numpy())
    assert res.extras["alpha"] == pytest.approx(float(ref.alpha_), rel=1e-12)
    torch.testing.assert_close(res.x, torch.as_tensor(ref.coef_, dtype=torch.float64), rtol=0, atol=1e-8)
    # scikit-learn stores the path from the largest alpha down; ours is in the given order
    sk_mse = torch.as_tensor(ref.mse_path_.mean(1), dtype=torch.float64).flip(0)
    torch.testing.assert_close(res.extras["cv_mse"], sk_mse, rtol=1e-7, atol=0)
    assert res.status == "converged" and res.extras["kkt_residual"] < 1e-9


def test_float32_follows_the_input_and_results_pickle() -> None:
    X, y = _problem(dtype=torch.float32)
    res = lasso(X, y, 0.1, max_iter=5000, tol=1e-6)
    assert res.x.dtype == torch.float32 and res.status == "converged"
    torch.testing.assert_close(res.x.double(), _sk_lasso(X.double(), y.double(), 0.1), rtol=0, atol=1e-4)
    assert lasso_path(X, y, torch.tensor([0.1, 0.3]), 50).dtype == torch.float32
    back = pickle.loads(pickle.dumps(res))
    assert back == res
    cv = lasso_cv(X, y, torch.tensor([0.05, 0.5]), 200)
    assert cv.x.dtype == torch.float32 and cv.extras["cv_mse"].dtype == torch.float32


def test_statuses_history_and_determinism() -> None:
    X, y = _problem(seed=3)
    capped = lasso(X, y, 0.1, max_iter=4)
    assert capped.status == "max_iter" and capped.n_iter == 4
    assert capped.history.steps == (0, 1, 2, 3, 4)
    assert capped.history.metrics["change"][0] == float("inf")
    timed = lasso(X, y, 0.1, max_iter=10_000, time_limit_s=0.0)
    assert timed.status == "timeout" and timed.n_iter == 1
    a, b = lasso(X, y, 0.1, max_iter=300), lasso(X, y, 0.1, max_iter=300)
    assert torch.equal(a.x, b.x) and a.history == b.history
    every = lasso(X, y, 0.1, max_iter=120, tol=0.0)
    sparse = lasso(X, y, 0.1, max_iter=120, tol=0.0, record_every=50)
    assert sparse.history.steps == (0, 50, 100, 120) and torch.equal(sparse.x, every.x)


def test_declared_solver_case_reaches_every_declared_status() -> None:
    (case,) = solver_cases()
    for dtype in case.dtypes:
        for status, overrides in case.statuses.items():
            res = case.run(dtype=dtype, **overrides)
            assert res.status == status, (dtype, status)
            if status == "max_iter":
                assert res.n_iter == case.max_iter
            if status == "converged":
                assert case.tolerance_holds(res) and case.optimality(res) <= case.optimality_tol
        for overrides, name in case.invalid:
            with pytest.raises((ValueError, TypeError), match=rf"^{name}"):
                case.run(dtype=dtype, **overrides)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda X, y: lasso(X[0], y, 0.1), "X"),
        (lambda X, y: lasso(X, y[:-1], 0.1), "y"),
        (lambda X, y: lasso(X, y.float(), 0.1), "y"),
        (lambda X, y: lasso(X * float("nan"), y, 0.1), "X"),
        (lambda X, y: lasso(X, y, -0.1), "alpha"),
        (lambda X, y: lasso(X, y, 0.1, max_iter=-1), "max_iter"),
        (lambda X, y: lasso_path(X, y, torch.tensor([[0.1]]), 10), "alphas"),
        (lambda X, y: lasso_path(X, y, torch.tensor([-0.1]), 10), "alphas"),
        (lambda X, y: lasso_path(X, y, torch.tensor([0.1]), 10, tol=-1.0), "tol"),
        (lambda X, y: lasso_cv(X, y, torch.tensor([0.1]), 10, folds=1), "folds"),
        (lambda X, y: lasso_cv(X, y, torch.tensor([0.1]), 10, refit_max_iter=-2), "refit_max_iter"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    X, y = _problem(n=20, d=4)
    with pytest.raises((ValueError, TypeError), match=rf"^{name}"):
        call(X, y)
