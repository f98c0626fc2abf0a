"""The type-2 Wasserstein worst case: closed forms, the fixed point, limits and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.dro import wasserstein_fixed_point, wasserstein_worst_case


def _samples(n: int = 60, d: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_linear_loss_worst_case_is_mean_plus_radius_times_norm() -> None:
    xi = _samples()
    a = torch.tensor([1.0, -2.0, 2.0], dtype=torch.float64)
    for rho in (0.1, 0.5, 2.0):
        res = wasserstein_worst_case(lambda z: z @ a, xi, radius=rho)
        assert res.status == "converged"
        assert res.value == pytest.approx(float((xi @ a).mean()) + rho * 3.0, abs=1e-7)
        # every point moves by rho * a / |a| (the worst case is a translation)
        assert torch.allclose(res.x - xi, (rho * a / 3.0).expand_as(xi), atol=1e-6)


def test_quadratic_loss_worst_case_is_the_scaled_distribution() -> None:
    xi = _samples(seed=1)
    alpha, rho = 0.8, 0.4
    res = wasserstein_worst_case(lambda z: 0.5 * alpha * (z * z).sum(1), xi, radius=rho, tol=1e-10)
    exact = 0.5 * alpha * (math.sqrt(float((xi * xi).sum(1).mean())) + rho) ** 2
    assert res.value == pytest.approx(exact, rel=1e-8)
    assert res.extras["dual_value"] == pytest.approx(exact, rel=1e-8)  # strong duality at the solution
    assert res.extras["transport_cost"] == pytest.approx(rho**2, rel=1e-8)


def test_weighted_samples_and_zero_radius() -> None:
    xi = _samples(n=5, seed=2)
    p = torch.tensor([0.4, 0.3, 0.1, 0.1, 0.1], dtype=torch.float64)
    a = torch.tensor([0.0, 3.0, 4.0], dtype=torch.float64)
    res = wasserstein_worst_case(lambda z: z @ a, xi, radius=0.2, weights=p)
    assert res.value == pytest.approx(float(p @ (xi @ a)) + 0.2 * 5.0, abs=1e-7)
    zero = wasserstein_worst_case(lambda z: z @ a, xi, radius=0.0, weights=p)
    assert zero.status == "converged" and zero.n_iter == 0
    assert zero.value == pytest.approx(float(p @ (xi @ a)))


def test_fixed_point_detects_a_non_concave_inner_problem() -> None:
    xi = _samples(n=4)
    # l = |z|^2 is 2-smooth; the inner problem is concave only for lam > 1
    z, ok, _ = wasserstein_fixed_point(lambda z: (z * z).sum(1), xi, lam=0.5)
    assert not ok
    z, ok, _ = wasserstein_fixed_point(lambda z: (z * z).sum(1), xi, lam=2.0)
    assert ok and torch.allclose(z, 2.0 * xi, atol=1e-10)  # z = xi + z / 2


def test_logistic_loss_primal_meets_dual_and_float32_follows() -> None:
    xi = _samples(n=30, seed=3)
    a = torch.tensor([1.0, 0.5, -1.0], dtype=torch.float64)
    res = wasserstein_worst_case(lambda z: torch.nn.functional.softplus(z @ a), xi, radius=0.3)
    assert res.status == "converged"
    assert res.value == pytest.approx(res.extras["dual_value"], abs=1e-7)
    assert res.value > res.extras["nominal_value"]
    r32 = wasserstein_worst_case(
        lambda z: torch.nn.functional.softplus(z @ a.float()), xi.float(), radius=0.3, tol=1e-4
    )
    assert r32.x.dtype == torch.float32
    assert r32.value == pytest.approx(res.value, rel=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "name", "err"),
    [
        ({"samples": [[0.0]]}, "samples", TypeError),
        ({"samples": torch.zeros(3)}, "samples", ValueError),
        ({"samples": torch.full((2, 2), math.nan)}, "samples", ValueError),
        ({"radius": -0.1}, "radius", ValueError),
        ({"weights": torch.ones(4)}, "weights", ValueError),
        ({"smoothness": -1.0}, "smoothness", ValueError),
        ({"lam0": 0.0}, "lam0", ValueError),
        ({"loss": 3}, "loss", TypeError),
        ({"loss": lambda z: z.sum()}, "loss", ValueError),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, name: str, err: type) -> None:
    args = {"loss": lambda z: z.sum(1), "samples": torch.zeros(4, 2, dtype=torch.float64), "radius": 0.1}
    args.update(kwargs)
    with pytest.raises(err, match=f"^{name}"):
        wasserstein_worst_case(args.pop("loss"), args.pop("samples"), **args)


def test_linear_w1_penalty_matches_skwdro_dedicated_logistic_regression() -> None:
    skl = pytest.importorskip("skwdro.linear_models", reason="skwdro 1.1.1 is the Wasserstein-DRO reference")
    from optarium.dro import linear_wasserstein_penalty

    g = torch.Generator().manual_seed(11)
    X = torch.randn(40, 2, generator=g, dtype=torch.float64)
    y = torch.sign(X @ torch.tensor([1.5, -1.0], dtype=torch.float64) + 0.5 * torch.randn(40, generator=g))
    rho = 0.1
    ref = skl.LogisticRegression(rho=rho, fit_intercept=False, solver="dedicated").fit(X.numpy(), y.numpy())
    theta = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=500,
        tolerance_grad=1e-12,
        tolerance_change=1e-15,
        line_search_fn="strong_wolfe",
    )

    def objective() -> torch.Tensor:
        return torch.nn.functional.softplus(-y * (X @ theta)).mean() + linear_wasserstein_penalty(theta, rho)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        f = objective()
        f.backward()
        return f

    opt.step(closure)
    # skwdro's cvxpy program (label flips at cost kappa = 1000, never worth it here) has the same optimum
    assert float(objective().detach()) == pytest.approx(float(ref.result_), abs=1e-6)
    assert torch.allclose(theta.detach(), torch.as_tensor(ref.coef_, dtype=torch.float64), atol=1e-3)
