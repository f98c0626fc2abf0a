"""optarium.problems.sparse_regression: the sparse truth, the noise level and the exact population MSE."""

from __future__ import annotations

import pytest
import torch

from optarium.problems.sparse_regression import population_mse, sparse_linear_regression


def test_draw_has_the_stated_model_and_is_seeded() -> None:
    X, y, w = sparse_linear_regression(4000, 6, 2, seed=3, noise_sd=0.5)
    assert X.shape == (4000, 6) and y.shape == (4000,) and X.dtype == y.dtype == torch.float64
    assert w.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    resid = y - X @ w
    assert float(resid.std()) == pytest.approx(0.5, rel=0.05)
    assert float((X.T @ resid / 4000).abs().max()) < 0.05  # noise independent of the design
    X2, y2, _ = sparse_linear_regression(4000, 6, 2, seed=3, noise_sd=0.5)
    assert torch.equal(X, X2) and torch.equal(y, y2)
    assert not torch.equal(X, sparse_linear_regression(4000, 6, 2, seed=4)[0])
    # noise_sd only scales the noise: same design, same noise draw
    X0, y0, _ = sparse_linear_regression(4000, 6, 2, seed=3, noise_sd=0.0)
    assert torch.equal(X0, X) and torch.equal(y0, X @ w)


def test_population_mse_is_the_test_error() -> None:
    X, y, w = sparse_linear_regression(20_000, 5, 1, seed=0, noise_sd=1.0)
    W = torch.stack([w, torch.zeros(5, dtype=torch.float64), torch.full((5,), 0.3, dtype=torch.float64)])
    exact = population_mse(W, w, 1.0)
    assert exact[0] == 1.0 and exact[1] == 2.0
    empirical = ((y[:, None] - X @ W.T) ** 2).mean(0)
    torch.testing.assert_close(empirical, exact, rtol=0.03, atol=0)


@pytest.mark.parametrize(
    ("args", "name"),
    [((0, 3, 1, 0), "n"), ((5, 0, 0, 0), "d"), ((5, 3, 4, 0), "n_nonzero"), ((5, 3, 1, -1), "seed")],
)
def test_bad_input_names_the_argument(args: tuple, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}"):
        sparse_linear_regression(*args)
    with pytest.raises(ValueError, match=r"^noise_sd"):
        sparse_linear_regression(5, 3, 1, 0, noise_sd=-1.0)
