"""optarium.optim.diagnostics: HVPs, dense Hessians and the top-eigenvalue (sharpness) estimators."""

import pytest
import torch

from optarium.optim import diagnostics
from optarium.optim.diagnostics import SharpnessTracker, flat_loss, hessian, hvp, sharpness, top_eigenvalue
from optarium.problems.datasets import load_digits

F64 = torch.float64


def _quadratic(eigenvalues: list[float], seed: int = 0) -> tuple[torch.Tensor, object]:
    g = torch.Generator().manual_seed(seed)
    n = len(eigenvalues)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=F64))
    A = q @ torch.diag(torch.tensor(eigenvalues, dtype=F64)) @ q.T
    return A, lambda z: 0.5 * z @ A @ z


def test_hvp_and_hessian_match_the_quadratic_form() -> None:
    A, f = _quadratic([5.0, 2.0, -1.0, 0.3])
    x = torch.randn(4, dtype=F64)
    v = torch.randn(4, dtype=F64)
    torch.testing.assert_close(hvp(f, x)(v), A @ v, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(hessian(f, x), A, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", ["lanczos", "power"])
def test_known_spectrum_largest_algebraic_not_largest_modulus(method: str) -> None:
    # The dominant eigenvalue is negative: "LA" must still return the largest algebraic one.
    spectrum = [-12.0, 7.0, 6.5, 3.0, 1.0, 0.5, -0.2, 0.1]
    _, f = _quadratic(spectrum, seed=1)
    x = torch.randn(len(spectrum), dtype=F64)
    tol = 1e-8 if method == "lanczos" else 1e-12
    top = top_eigenvalue(f, x, method=method, which="LA", tol=tol)
    assert abs(top.value - 7.0) <= 1e-6 * 7.0
    assert top.n_hvp > 0
    modulus = top_eigenvalue(f, x, method=method, which="LM", tol=tol)
    assert abs(modulus.value + 12.0) <= 1e-6 * 12.0


def test_eigenvector_is_a_unit_eigenvector() -> None:
    A, f = _quadratic([4.0, 1.0, 0.5, 0.25, -3.0], seed=2)
    est = top_eigenvalue(f, torch.zeros(5, dtype=F64), tol=1e-10)
    assert abs(float(est.vector.norm()) - 1.0) < 1e-10
    torch.testing.assert_close(A @ est.vector, est.value * est.vector, rtol=0, atol=1e-8)


def test_dimension_below_three_uses_the_dense_hessian() -> None:
    est = top_eigenvalue(lambda z: (z[0] ** 2) * 1.5 - z[1] ** 2, torch.ones(2, dtype=F64))
    assert est.method == "dense" and est.n_hvp == 2
    assert est.value == pytest.approx(3.0, rel=1e-12)


def _pooled_digits(n: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    X, y = load_digits()
    X = X[:n].reshape(n, 1, 8, 8).to(F64)
    X = torch.nn.functional.avg_pool2d(X, 2).reshape(n, 16)
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    return X, torch.nn.functional.one_hot(y[:n], 10).to(F64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sharpness_of_a_small_mlp_matches_the_full_hessian(seed: int) -> None:
    # Spec test 4: 16-12-10 tanh MLP (334 parameters), 200 pooled digits; Lanczos at tol 1e-6 vs eigvalsh.
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.Tanh(), torch.nn.Linear(12, 10)).to(F64)
    X, Y = _pooled_digits()

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((out - target) ** 2).sum(1).mean()

    estimate = sharpness(model, loss_fn, (X, Y), tol=1e-6)
    f, x = flat_loss(model, loss_fn, (X, Y))
    exact = float(torch.linalg.eigvalsh(hessian(f, x))[-1])
    assert abs(estimate - exact) <= 1e-4 * abs(exact)
    # flat_loss evaluates the model's own loss and leaves its parameters alone
    with torch.no_grad():
        assert float(f(x)) == pytest.approx(float(loss_fn(model(X), Y)), rel=1e-12)


def test_deterministic_under_a_seed_and_float32_follows_the_input() -> None:
    _, f = _quadratic([3.0, 2.9, 1.0, 0.5], seed=3)
    x = torch.randn(4, dtype=F64)
    a = top_eigenvalue(f, x, seed=7)
    b = top_eigenvalue(f, x, seed=7)
    assert a.value == b.value and torch.equal(a.vector, b.vector)
    x32 = x.float()
    est = top_eigenvalue(lambda z: 0.5 * z @ (torch.eye(4) * 2.0) @ z, x32)
    assert est.vector.dtype == torch.float32 and est.value == pytest.approx(2.0, rel=1e-5)


def test_unconverged_iterations_raise_instead_of_returning_a_value() -> None:
    _, f = _quadratic([1.0, 0.999, 0.5, 0.1], seed=4)
    with pytest.raises(RuntimeError, match="maxiter"):
        top_eigenvalue(f, torch.ones(4, dtype=F64), method="power", tol=1e-14, maxiter=3)


def test_nonfinite_hvp_raises() -> None:
    with pytest.raises(FloatingPointError, match="f:"):
        top_eigenvalue(lambda z: (z**4).sum() * float("inf"), torch.ones(4, dtype=F64))


@pytest.mark.parametrize(
    ("kwargs", "match", "error"),
    [
        ({"method": "arnoldi"}, "method", ValueError),
        ({"which": "SM"}, "which", ValueError),
        ({"method": "power", "which": "SA"}, "which", ValueError),
        ({"tol": 0.0}, "tol", ValueError),
        ({"maxiter": 0}, "maxiter", ValueError),
        ({"seed": -1}, "seed", ValueError),
    ],
)
def test_bad_arguments_name_themselves(kwargs: dict, match: str, error: type) -> None:
    with pytest.raises(error, match=match):
        top_eigenvalue(lambda z: (z**2).sum(), torch.ones(4, dtype=F64), **kwargs)


def test_bad_points_and_models() -> None:
    f = lambda z: (z**2).sum()  # noqa: E731
    with pytest.raises(ValueError, match="x:"):
        top_eigenvalue(f, torch.ones(2, 2, dtype=F64))
    with pytest.raises(TypeError, match="x:"):
        top_eigenvalue(f, [1.0, 2.0])
    with pytest.raises(ValueError, match="x:"):
        top_eigenvalue(f, torch.tensor([1.0, float("nan"), 0.0]))
    with pytest.raises(TypeError, match="f:"):
        top_eigenvalue(3, torch.ones(3))
    with pytest.raises(TypeError, match="model:"):
        sharpness(lambda x: x, torch.nn.functional.mse_loss, (torch.ones(2), torch.ones(2)))
    with pytest.raises(ValueError, match="batch:"):
        sharpness(torch.nn.Linear(2, 1), torch.nn.functional.mse_loss, (torch.ones(2),))


def _mlp_problem(seed: int = 0) -> tuple[torch.nn.Module, object, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.Tanh(), torch.nn.Linear(12, 10)).to(F64)

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((out - target) ** 2).sum(1).mean()

    return model, loss_fn, _pooled_digits()


def test_reverse_and_forward_products_agree() -> None:
    model, loss_fn, batch = _mlp_problem(1)
    f, x = flat_loss(model, loss_fn, batch)
    v = torch.randn(x.numel(), generator=torch.Generator().manual_seed(0), dtype=F64)
    forward = hvp(f, x)(v)
    reverse = diagnostics._reverse_hvp(f, x)(v)
    torch.testing.assert_close(reverse, forward, rtol=1e-10, atol=1e-12)
    a = top_eigenvalue(f, x, tol=1e-8, products="forward").value
    b = top_eigenvalue(f, x, tol=1e-8, products="reverse").value
    assert a == pytest.approx(b, rel=1e-7)
    # an affine function has a zero Hessian in both modes
    lin = top_eigenvalue(lambda z: z.sum() * 2.0, torch.ones(5, dtype=F64), which="LM", method="power")
    assert lin.value == 0.0


def test_warm_start_from_the_eigenvector_needs_fewer_products() -> None:
    _, f = _quadratic([9.0, 8.5, 8.0, 3.0, 2.0, 1.0, 0.5, 0.1, -1.0, 0.2], seed=5)
    x = torch.zeros(10, dtype=F64)
    cold = top_eigenvalue(f, x, tol=1e-10, ncv=4)
    warm = top_eigenvalue(f, x, tol=1e-10, ncv=4, v0=cold.vector + 1e-6)
    assert warm.value == pytest.approx(cold.value, rel=1e-9) == 9.0
    assert warm.n_hvp < cold.n_hvp


def test_tracker_matches_cold_estimates_along_a_trajectory_and_is_deterministic() -> None:
    model, loss_fn, batch = _mlp_problem(2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    track = SharpnessTracker(model, loss_fn, batch, tol=1e-9, seed=3)
    values, cold_values = [], []
    for _ in range(4):
        values.append(track())
        cold_values.append(sharpness(model, loss_fn, batch, tol=1e-9))
        opt.zero_grad()
        loss_fn(model(batch[0]), batch[1]).backward()
        opt.step()
    assert values == pytest.approx(cold_values, rel=1e-6)
    assert track.n_hvp > 0 and track.vector is not None
    model2, _, _ = _mlp_problem(2)
    again = SharpnessTracker(model2, loss_fn, batch, tol=1e-9, seed=3)
    assert again() == values[0]


def test_bad_warm_starts_products_and_tracker_arguments() -> None:
    f = lambda z: (z**2).sum()  # noqa: E731
    x = torch.ones(4, dtype=F64)
    with pytest.raises(ValueError, match="products"):
        top_eigenvalue(f, x, products="central")
    with pytest.raises(ValueError, match="v0"):
        top_eigenvalue(f, x, v0=torch.zeros(4, dtype=F64))
    with pytest.raises(ValueError, match="v0"):
        top_eigenvalue(f, x, v0=torch.ones(3, dtype=F64))
    with pytest.raises(TypeError, match="v0"):
        top_eigenvalue(f, x, v0=[1.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="ncv"):
        top_eigenvalue(f, x, ncv=1)
    model, loss_fn, batch = _mlp_problem()
    with pytest.raises(ValueError, match="tol"):
        SharpnessTracker(model, loss_fn, batch, tol=-1.0)
    with pytest.raises(ValueError, match="mix"):
        SharpnessTracker(model, loss_fn, batch, mix=0.0)
    with pytest.raises(ValueError, match="batch"):
        SharpnessTracker(model, loss_fn, batch[:1])
