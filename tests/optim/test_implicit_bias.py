"""norm-sharpness laboratory: DLN gradients and Hessians, sharpness, GD batched over η, min-ℓ1, the sweep.

The spec's tests (../shared/papers/norm-sharpness.md, "Tests that would show it works"), in float64.
"""

from __future__ import annotations

import math

import pytest
import torch

from optarium.optim.diagnostics import top_eigenvalue
from optarium.optim.implicit_bias import (
    DiagonalLinearNet,
    bracket_max_lr,
    dln_gd,
    dln_gradient,
    dln_hessian,
    dln_loss,
    dln_sharpness,
    lr_grid,
    lr_sweep,
    max_stable_lr,
    min_l1_interpolator,
    min_l2_interpolator,
    mlp_gd,
    mlp_module,
    paired_mse_difference,
)

torch.set_num_threads(1)
F64 = torch.float64


def _problem(d: int = 20, n: int = 8, k: int = 3, noise: float = 0.0, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=F64)
    w = torch.zeros(d, dtype=F64)
    w[:k] = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.0][:k], dtype=F64)
    y = x @ w + noise * torch.randn(n, generator=g, dtype=F64)
    return x, y, w


def _flat_loss(x: torch.Tensor, y: torch.Tensor):
    d = x.shape[1]
    return lambda th: dln_loss(th[:d], th[d:], x, y)


# ------------------------------------------------------------------------ test 1: the sharpness estimator
def test_power_and_lanczos_match_the_known_spectrum_of_a_quadratic() -> None:
    g = torch.Generator().manual_seed(3)
    q, _ = torch.linalg.qr(torch.randn(30, 30, generator=g, dtype=F64))
    spec = torch.linspace(0.1, 4.0, 30, dtype=F64)
    spec[-1] = 7.0
    a = q @ torch.diag(spec) @ q.T
    f = lambda z: 0.5 * z @ a @ z  # noqa: E731
    x = torch.randn(30, generator=g, dtype=F64)
    power = top_eigenvalue(f, x, method="power", tol=1e-10, maxiter=5000).value
    lanczos = top_eigenvalue(f, x, method="lanczos", which="LA", tol=1e-10).value
    assert power == pytest.approx(7.0, rel=1e-4)
    assert lanczos == pytest.approx(float(torch.linalg.eigvalsh(a)[-1]), rel=1e-4)


def test_dln_sharpness_at_an_interpolator_is_psd_and_matches_the_estimators() -> None:
    x, y, _ = _problem(noise=0.1)
    runs = dln_gd(x, y, [0.05], 0.5, max_steps=50_000, tol=1e-14, check_every=1)
    assert runs.status == ("converged",)
    u, v = runs.u[0], runs.v[0]
    h = dln_hessian(u, v, x, y)
    jac = torch.cat([2 * x * u, -2 * x * v], dim=1)
    assert torch.allclose(h, jac.T @ jac / x.shape[0], atol=1e-6)  # the residual term vanishes
    eig = torch.linalg.eigvalsh(h)
    assert float(eig[0]) >= -1e-6 * float(eig[-1])  # PSD at an interpolator
    theta = torch.cat([u, v])
    power = top_eigenvalue(_flat_loss(x, y), theta, method="power", tol=1e-10, maxiter=5000).value
    lanczos = top_eigenvalue(_flat_loss(x, y), theta, method="lanczos", tol=1e-10).value
    assert power == pytest.approx(float(eig[-1]), rel=1e-4)
    assert lanczos == pytest.approx(float(eig[-1]), rel=1e-4)
    assert float(dln_sharpness(u, v, x, y)) == pytest.approx(float(eig[-1]), rel=1e-12)


# --------------------------------------------------------------- test 5: gradient and Hessian references
def test_analytic_gradient_and_hessian_match_autograd_and_finite_differences() -> None:
    x, y, _ = _problem(d=7, n=5, noise=0.3)
    g = torch.Generator().manual_seed(1)
    u = torch.randn(7, generator=g, dtype=F64)
    v = torch.randn(7, generator=g, dtype=F64)
    f = _flat_loss(x, y)
    theta = torch.cat([u, v])
    gu, gv = dln_gradient(u, v, x, y)
    grad = torch.cat([gu, gv])
    auto = torch.func.grad(f)(theta)
    assert torch.allclose(grad, auto, rtol=1e-12, atol=1e-12)
    eps = 1e-6
    eye = torch.eye(14, dtype=F64)
    fd = torch.stack([(f(theta + eps * e) - f(theta - eps * e)) / (2 * eps) for e in eye])
    assert torch.allclose(grad, fd, rtol=1e-6, atol=1e-8)
    h = dln_hessian(u, v, x, y)
    assert torch.allclose(h, torch.func.hessian(f)(theta), rtol=1e-10, atol=1e-10)
    # the module's methods agree with the functions, batched rows with single ones
    net = DiagonalLinearNet(7, 0.3)
    with torch.no_grad():
        net.u.copy_(u)
        net.v.copy_(v)
    net.loss(x, y).backward()
    assert torch.allclose(torch.cat([net.u.grad, net.v.grad]), net.gradient(x, y), atol=1e-12)
    assert torch.allclose(net.hessian(x, y), h) and net.sharpness(x, y) == pytest.approx(float(
        torch.linalg.eigvalsh(h)[-1]), rel=1e-12)  # fmt: skip
    hb = dln_hessian(torch.stack([u, 2 * u]), torch.stack([v, v]), x, y)
    assert torch.allclose(hb[0], h) and torch.allclose(hb[1], dln_hessian(2 * u, v, x, y))


def test_batched_gd_equals_torch_sgd_on_the_module() -> None:
    x, y, _ = _problem(noise=0.1)
    lrs = [0.01, 0.05, 0.2]
    runs = dln_gd(x, y, lrs, 0.3, max_steps=60, tol=1e-300)
    assert runs.status == ("not converged",) * 3 and runs.steps == (60, 60, 60)
    for i, lr in enumerate(lrs):
        net = DiagonalLinearNet(20, 0.3)
        opt = torch.optim.SGD(net.parameters(), lr=lr)
        for _ in range(60):
            opt.zero_grad()
            net.loss(x, y).backward()
            opt.step()
        assert torch.allclose(runs.u[i], net.u.detach(), rtol=1e-11, atol=1e-13)
        assert torch.allclose(runs.v[i], net.v.detach(), rtol=1e-11, atol=1e-13)
        assert runs.loss[i] == pytest.approx(float(net.loss(x, y).detach()), rel=1e-10)


# --------------------------------------------------------------------- test 2: small η reaches min-ℓ1
def test_small_lr_gd_from_small_init_lands_on_the_min_l1_interpolator() -> None:
    x, y, _ = _problem(d=40, n=20, k=3)
    runs = dln_gd(x, y, [0.1], 1e-3, max_steps=200_000, tol=1e-8)
    assert runs.status == ("converged",)
    w1 = min_l1_interpolator(x, y)
    rel = float((runs.effective_weight()[0] - w1).norm() / w1.norm())
    assert rel < 0.1


@pytest.mark.slow
def test_small_lr_gd_lands_on_min_l1_at_the_spec_size() -> None:
    """The spec's size (d = 100, n = 40, η = 0.05, α = 1e-3, 2e5 steps): relative ℓ2 gap < 10 %."""
    x, y, _ = _problem(d=100, n=40, k=5)
    runs = dln_gd(x, y, [0.05], 1e-3, max_steps=200_000, tol=1e-10)
    w1 = min_l1_interpolator(x, y)
    assert float((runs.effective_weight()[0] - w1).norm() / w1.norm()) < 0.1


def test_min_l1_interpolator_is_feasible_optimal_and_recovers_a_sparse_truth() -> None:
    x, y, w = _problem(d=40, n=20, k=2)
    w1 = min_l1_interpolator(x, y)
    w2 = min_l2_interpolator(x, y)
    assert torch.allclose(x @ w1, y, atol=1e-8) and torch.allclose(x @ w2, y, atol=1e-10)
    assert torch.allclose(w1, w, atol=1e-7)  # basis pursuit recovers a 2-sparse truth from 20 measurements
    assert float(w1.abs().sum()) <= float(w2.abs().sum())
    # min-ℓ2 is orthogonal to the null space: no interpolator has a smaller ℓ2 norm
    assert float(w2.norm()) <= float(w1.norm())


# ---------------------------------------------------------- tests 3, 4, 6: the sweep and its invariants
def test_converged_runs_obey_the_stability_limit_and_the_dial_turns() -> None:
    x, y, _ = _problem(d=30, n=12, k=3, noise=0.1)
    eta_max, info = max_stable_lr(x, y, 0.1, max_steps=3000, tol=1e-6, bisections=3)
    assert info["bracket"][0] == eta_max < info["bracket"][1]
    runs = dln_gd(x, y, lr_grid(eta_max, n_top=4), 0.1, max_steps=3000, tol=1e-6)
    assert runs.converged[-1]  # η_max converged in the probe, so it does in the sweep
    s = dln_sharpness(runs.u, runs.v, x, y)
    for lr, ok, si in zip(runs.lrs, runs.converged, s.tolist(), strict=True):
        if ok:
            assert lr * si <= 2 * 1.05
    assert float(s[-1]) < float(s[0])  # the sharpness falls with η (EoS end of the grid)


def test_divergence_is_recorded_not_raised() -> None:
    x, y, _ = _problem(noise=0.1)
    runs = dln_gd(x, y, [0.01, 50.0], 0.3, max_steps=2000, tol=1e-6)
    assert runs.status[1] == "diverged" and runs.steps[1] < 100
    assert torch.isnan(runs.u[1]).all() and torch.isfinite(runs.u[0]).all()
    sweep = lr_sweep(lambda: DiagonalLinearNet(20, 0.3), (x, y), (x, y), lrs=[0.01, 50.0], max_steps=2000)
    bad = sweep.records[1]
    assert bad["status"] == "diverged" and not bad["converged"] and math.isnan(bad["sharpness"])


def test_sweep_is_reproducible_with_one_record_per_lr_and_seed() -> None:
    def data(seed: int):
        x, y, _ = _problem(d=20, n=8, noise=0.1, seed=seed)
        return x, y

    kw = {"lrs": "auto", "max_steps": 1500, "tol": 1e-4, "seeds": [0, 1], "record_every": 500}
    a = lr_sweep(lambda: DiagonalLinearNet(20, 0.1), data, data, val=data, **kw)
    b = lr_sweep(lambda seed: DiagonalLinearNet(20, 0.1), data, data, val=data, **kw)
    assert len(a.records) == 2 * 12 and {(r["lr"], r["seed"]) for r in a.records} == set(a.traces)
    assert [dict(r) for r in a.records] == [dict(r) for r in b.records]
    assert set(a.eta_max) == {0, 1}
    fracs = sorted({round(r["lr_frac"], 9) for r in a.records})
    assert fracs[:3] == [0.01, 0.1, 0.3] and fracs[-1] == 1.0
    assert a.column("status") == b.column("status")


def test_batched_bisection_brackets_like_sequential_bisection() -> None:
    edge = 0.7371

    def converges(cands: list[float]) -> list[bool]:
        return [c <= edge for c in cands]

    lo, info = bracket_max_lr(converges, 0.1, bisections=6)
    a, b = 0.4, 0.8  # the doubling bracket from 0.1
    for _ in range(6):
        mid = (a + b) / 2
        a, b = (mid, b) if mid <= edge else (a, mid)
    assert lo == pytest.approx(a, rel=1e-12) and info["bracket"][1] == pytest.approx(b, rel=1e-12)
    lo_down, _ = bracket_max_lr(converges, 3.0, bisections=0)  # eta0 fails: halving
    assert lo_down == pytest.approx(0.375)


def test_paired_mse_difference_matches_the_definition() -> None:
    t = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=F64)
    a, b = t + 1.0, t + torch.tensor([0.5, -0.5, 0.0, 1.0], dtype=F64)
    mean, se = paired_mse_difference(a, b, t)
    diff = torch.tensor([0.75, 0.75, 1.0, 0.0], dtype=F64)
    assert mean == pytest.approx(float(diff.mean())) and se == pytest.approx(float(diff.std() / 2))


# ------------------------------------------------------------------------------------------------ the MLP
def test_batched_mlp_gd_equals_torch_sgd_and_records_divergence() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(30, 5, generator=g, dtype=F64)
    y = torch.nn.functional.one_hot(torch.randint(0, 3, (30,), generator=g), 3).to(F64)
    runs = mlp_gd(x, y, [0.05, 0.3, 1e4], hidden=8, seed=4, max_steps=40, tol=1e-12)
    assert runs.status[:2] == ("not converged", "not converged") and runs.status[2] == "diverged"
    assert torch.isnan(runs.row(2)[0]).all()
    for i, lr in enumerate([0.05, 0.3]):
        net = mlp_module(*runs.init)
        opt = torch.optim.SGD(net.parameters(), lr=lr)
        for _ in range(40):
            opt.zero_grad()
            (0.5 * ((net(x) - y) ** 2).sum(1).mean()).backward()
            opt.step()
        got = mlp_module(*runs.row(i))
        for p, q in zip(got.parameters(), net.parameters(), strict=True):
            assert torch.allclose(p, q, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- test 7: bad input
def test_bad_input_raises_with_the_argument_name() -> None:
    x, y, _ = _problem()
    with pytest.raises(ValueError, match=r"^alpha"):
        DiagonalLinearNet(5, 0.0)
    with pytest.raises(ValueError, match=r"^alpha"):
        dln_gd(x, y, [0.1], -1.0)
    with pytest.raises(ValueError, match=r"^lrs"):
        dln_gd(x, y, [], 0.1)
    with pytest.raises(ValueError, match=r"^lrs"):
        lr_sweep(lambda: DiagonalLinearNet(20, 0.1), (x, y), lrs=[])
    with pytest.raises(ValueError, match=r"^lrs"):
        dln_gd(x, y, [0.1, math.nan], 0.1)
    with pytest.raises(ValueError, match=r"^y"):
        dln_gd(x, y[:3], [0.1], 0.1)
    with pytest.raises(ValueError, match=r"^parametrization"):
        DiagonalLinearNet(5, 0.1, parametrization="uv")
    xs, ys, _ = _problem(d=5, n=8)
    with pytest.warns(UserWarning, match=r"^data: n = 8 >= d = 5"):
        lr_sweep(lambda: DiagonalLinearNet(5, 0.1), (xs, ys), lrs=[0.01], max_steps=10)
