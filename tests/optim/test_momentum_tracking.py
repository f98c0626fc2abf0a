"""optarium.optim.momentum_tracking: the spec's tests (torch.optim.SGD equality, rates, lags, noise floor),
the analytic values against the spec's numbers and against Monte Carlo, the decomposition, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.optim.momentum_tracking import (
    analytic_error_curve,
    batched_errors,
    iteration_matrix,
    raw_lr,
    stability_limit,
    stationary_error,
    track,
    tracking_decomposition,
)
from optarium.problems.drifting import DriftingQuadratic, drift_statistics, log_spaced_eigenvalues

F64 = torch.float64


def _run(prob: DriftingQuadratic, real, lr: float, beta: float, nesterov: bool, sequence: str = "gradient"):
    n, t = real.theta0.shape[0], real.steps
    return batched_errors(
        real.theta0,
        real.path,
        real.noise,
        real.x0(),
        prob.eigenvalues,
        torch.full((1, n), lr, dtype=F64),
        torch.full((1, n), beta, dtype=F64),
        torch.full((1, n), nesterov),
        torch.zeros(n, t, dtype=F64),
        delta=real.delta,
        noise_std=real.noise_std,
        sequence=sequence,
        record=True,
    )


def test_beta_zero_is_sgd_exactly() -> None:
    prob = DriftingQuadratic(dim=8, drift="random_walk", delta=0.05, noise_std=0.3, init_std=1.0, seed=1)
    ref = track(prob, "sgd", 0.7, 0.0, steps=150, n_seeds=3)
    for method in ("heavy_ball", "nesterov"):
        res = track(prob, method, 0.7, 0.0, steps=150, n_seeds=3)
        assert torch.equal(res.x, ref.x) and res.history == ref.history and res.value == ref.value


@pytest.mark.parametrize("nesterov", [False, True])
def test_heavy_ball_and_nesterov_equal_torch_sgd(nesterov: bool) -> None:
    """Spec test 2: the simulator's iterates are torch.optim.SGD(momentum=β[, nesterov=True])'s."""
    prob = DriftingQuadratic(dim=10, drift="rotation", delta=0.05, noise_std=0.3, init_std=1.0, seed=2)
    real = prob.realise([0], 100)
    lr, beta = 0.6, 0.9
    out = _run(prob, real, lr, beta, nesterov)
    theta, noise = real.theta()[0], prob.noise_std * real.noise[0]
    x = real.x0()[0].clone().requires_grad_(True)
    opt = torch.optim.SGD([x], lr=lr, momentum=beta, nesterov=nesterov)
    sq = []
    for t in range(100):
        sq.append(float(((x.detach() - theta[t]) ** 2).sum()))
        opt.zero_grad()
        x.grad = prob.grad(x.detach(), theta[t], real.noise[0][t])
        torch.testing.assert_close(x.grad, prob.eigenvalues * (x.detach() - theta[t]) + noise[t])
        opt.step()
    torch.testing.assert_close(out["final"][0, 0], x.detach(), rtol=0, atol=1e-10)
    torch.testing.assert_close(out["sq"][:100, 0, 0], torch.tensor(sq, dtype=F64), rtol=1e-10, atol=1e-12)


def test_heavy_ball_rate_on_ill_conditioned_quadratic() -> None:
    """Spec test 3: κ = 100, tuned HB contracts at ρ = (√κ-1)/(√κ+1) (fit over t in [100, 300], θ = 0)."""
    lam = log_spaced_eigenvalues(20, 0.01, 1.0)
    kappa = 100.0
    lr = 4.0 / (1.0 + 0.1) ** 2
    beta = ((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)) ** 2
    x0 = torch.randn(1, 20, dtype=F64, generator=torch.Generator().manual_seed(0))
    zeros = torch.zeros(1, 301, 20, dtype=F64)
    out = batched_errors(
        torch.zeros(1, 20, dtype=F64),
        zeros,
        torch.zeros(1, 300, 20, dtype=F64),
        x0,
        lam,
        torch.tensor([[lr]], dtype=F64),
        torch.tensor([[beta]], dtype=F64),
        torch.tensor([[False]]),
        torch.zeros(1, 300, dtype=F64),
        record=True,
    )
    logs = 0.5 * torch.log(out["sq"][100:300, 0, 0])
    t = torch.arange(100, 300, dtype=F64)
    slope = float(((t - t.mean()) * (logs - logs.mean())).sum() / ((t - t.mean()) ** 2).sum())
    rho = math.exp(slope)
    target = (math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)
    assert rho == pytest.approx(target, rel=0.02)
    assert rho < (kappa - 1) / (kappa + 1)


@pytest.mark.parametrize(("method", "beta"), [("sgd", 0.0), ("heavy_ball", 0.9), ("nesterov", 0.9)])
def test_constant_velocity_lag(method: str, beta: float) -> None:
    """Spec test 4: lag v/(ηλ) (SGD), (1-β)v/(ηλ) (HB; NAG's gradient sequence), + βv on NAG's x_t."""
    lam_v, v, lr = 0.5, 0.01, 0.5
    prob = DriftingQuadratic(dim=1, mu=lam_v, L=lam_v, drift="linear", delta=v, seed=0)
    real = prob.realise([0], 1500)
    sign = float(real.path[0, 1, 0])  # the direction u = ±1
    base = (1 - beta) * v / (lr * lam_v)
    for sequence, expected in (("gradient", base), ("x", base + (beta * v if method == "nesterov" else 0.0))):
        out = _run(prob, real, lr, beta, method == "nesterov", sequence=sequence)
        lag = math.sqrt(float(out["sq"][-1, 0, 0]))  # |theta_t - x_t| at the last measured step
        assert lag == pytest.approx(expected, rel=1e-6)
    # the sign: the iterate trails the optimum (theta_T - p_T has the direction of the velocity)
    assert float(real.theta()[0, -1, 0] - out["final"][0, 0, 0]) * sign > 0


def test_sgd_noise_floor() -> None:
    """Spec test 5: SGD's stationary variance ησ²/(λ(2-ηλ)) within 3 Monte Carlo SE (2000 seeds)."""
    lam_v, sigma, lr = 1.0, 1.0, 0.5
    prob = DriftingQuadratic(dim=1, mu=lam_v, L=lam_v, delta=0.0, noise_std=sigma, seed=5)
    burn = int(10 / (lr * lam_v))
    res = track(
        prob, "sgd", lr, 0.0, steps=burn + 1, n_seeds=2000, window=(burn, burn + 1), record_every=burn + 1
    )
    expected = lr * sigma**2 / (lam_v * (2 - lr * lam_v))
    assert abs(res.value - expected) < 3 * res.extras["se"]
    assert res.extras["analytic"] == pytest.approx(expected, rel=1e-8)


def test_analytic_optima_match_the_spec_values() -> None:
    """The stationary Lyapunov optimum over η (units δ²/d, random walk σ = 0): the spec's numbers."""
    lam = log_spaced_eigenvalues(20, 0.1, 1.0)
    expected = {
        ("sgd", 0.0): 32.9,
        ("heavy_ball", 0.5): 32.0,
        ("heavy_ball", 0.9): 108.0,
        ("heavy_ball", 0.99): 1008.0,
        ("nesterov", 0.9): 34.4,
        ("nesterov", 0.99): 39.5,
    }
    for (method, beta), value in expected.items():
        lim = stability_limit(method, beta, 1.0)
        lrs = torch.logspace(-3, math.log10(0.999 * lim), 600, dtype=F64)
        best = float(stationary_error(method, lrs, beta, lam, drift_var=1.0, sequence="x").min())
        assert best == pytest.approx(value, rel=0.005), (method, beta)
    # look-ahead sequence of NAG: a different (larger) value, same as HB's sequence for HB
    lrs = torch.logspace(-3, math.log10(0.999 * stability_limit("nesterov", 0.9, 1.0)), 600, dtype=F64)
    assert float(stationary_error("nesterov", lrs, 0.9, lam, drift_var=1.0).min()) > 36.0


def test_analytic_curve_converges_to_lyapunov_and_matches_monte_carlo() -> None:
    lam = log_spaced_eigenvalues(6, 0.2, 1.0)
    curve = analytic_error_curve(
        "heavy_ball", 0.4, 0.7, lam, 600, drift="random_walk", delta=0.1, noise_std=0.2
    )
    stat = stationary_error("heavy_ball", 0.4, 0.7, lam, noise_std=0.2, drift_var=0.01 / 6)
    assert float(curve[0, -1]) == pytest.approx(float(stat[0]), rel=1e-9)
    # Monte Carlo over seeds for the deterministic drifts (exact average over the random directions)
    for drift in ("linear", "rotation", "switch"):
        prob = DriftingQuadratic(
            dim=6,
            mu=0.2,
            L=1.0,
            drift=drift,
            delta=0.1,
            noise_std=0.1,
            init_std=0.5,
            switch_every=20,
            omega=0.1,
            seed=7,
        )
        res = track(prob, "nesterov", 0.5, 0.8, steps=80, n_seeds=800, window=(40, 80), sequence="x")
        assert abs(res.value - res.extras["analytic"]) < 4 * res.extras["se"], drift


def test_decomposition_is_additive() -> None:
    prob = DriftingQuadratic(dim=6, drift="random_walk", delta=0.05, noise_std=0.2, init_std=1.0, seed=3)
    parts = tracking_decomposition(
        prob, "heavy_ball", 1.0, 0.5, steps=200, n_seeds=400, parametrization="effective", window=(0, 200)
    )
    assert abs(parts["rel_gap"]) < 0.05
    total = parts["analytic_noise"] + parts["analytic_drift"] + parts["analytic_init"]
    assert total == pytest.approx(parts["analytic_joint"], rel=1e-10)


def test_noise_free_errors_scale_with_delta_squared() -> None:
    a = track(DriftingQuadratic(dim=5, delta=1e-2, seed=0), "heavy_ball", 0.5, 0.9, steps=300, n_seeds=4)
    b = track(DriftingQuadratic(dim=5, delta=5e-2, seed=0), "heavy_ball", 0.5, 0.9, steps=300, n_seeds=4)
    ratio = b.extras["per_seed"] / a.extras["per_seed"]
    torch.testing.assert_close(ratio, torch.full_like(ratio, 25.0), rtol=1e-6, atol=0)


def test_result_contract_and_drift_report() -> None:
    prob = DriftingQuadratic(dim=4, drift="switch", delta=1.0, switch_every=10, seed=0)
    res = track(prob, "nesterov", 2.0, 0.5, steps=50, n_seeds=3, parametrization="effective", record_every=10)
    assert res.status == "max_iter" and res.n_iter == 50 and res.history.steps == (0, 10, 20, 30, 40, 50)
    assert res.extras["lr"] == pytest.approx(1.0) and res.extras["lr_effective"] == pytest.approx(2.0)
    assert res.extras["window"] == (10, 50) and tuple(res.x.shape) == (3, 4)
    delta_t, v_t = drift_statistics(prob.realise([0, 1, 2], 50).theta(), prob.eigenvalues)
    assert torch.equal(res.extras["delta_t"], delta_t) and torch.equal(res.extras["V_T"], v_t)
    assert int((res.extras["delta_t"] > 0).sum()) == 3 * 5  # five jumps per seed
    unstable = track(prob, "sgd", 2.5, 0.0, steps=400, n_seeds=2)
    assert unstable.status == "diverged" or unstable.value > 1e50  # η = 2.5 > 2/L: the error explodes


def test_stability_limits_match_the_iteration_matrix() -> None:
    for method, beta in (("sgd", 0.0), ("heavy_ball", 0.9), ("nesterov", 0.9), ("nesterov", 0.3)):
        lim = stability_limit(method, beta, 2.0)
        for f, stable in ((0.999, True), (1.001, False)):
            rho = torch.linalg.eigvals(iteration_matrix(method, f * lim, beta, 2.0)).abs().max()
            assert bool(rho < 1) is stable, (method, beta, f)
    assert raw_lr(2.0, 0.9, "effective") == pytest.approx(0.2) and raw_lr(2.0, 0.9) == 2.0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda p: track(p, "heavy_ball", 0.5, 1.0, steps=5, n_seeds=1), "beta"),
        (lambda p: track(p, "heavy_ball", 0.5, -0.1, steps=5, n_seeds=1), "beta"),
        (lambda p: track(p, "sgd", 0.5, 0.9, steps=5, n_seeds=1), "beta"),
        (lambda p: track(p, "sgd", 0.0, 0.0, steps=5, n_seeds=1), "lr"),
        (lambda p: track(p, "sgd", -1.0, 0.0, steps=5, n_seeds=1), "lr"),
        (lambda p: track(p, "adam", 0.5, 0.0, steps=5, n_seeds=1), "method"),
        (lambda p: track(p, "sgd", 0.5, 0.0, steps=5, n_seeds=1, parametrization="x"), "parametrization"),
        (lambda p: track(p, "sgd", 0.5, 0.0, steps=0, n_seeds=1), "steps"),
        (lambda p: track("quadratic", "sgd", 0.5, 0.0), "problem"),
        (lambda p: track(p, "sgd", 0.5, 0.0, steps=5, n_seeds=1, window=(4, 9)), "window"),
        (lambda p: stability_limit("heavy_ball", 0.5, 0.0), "lam"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    prob = DriftingQuadratic(dim=3)
    with pytest.raises((ValueError, TypeError), match=rf"^{name}"):
        call(prob)
