"""Tests for optarium.soft._anchor_plan: batched regularised OT onto anchors (spec tests 3 and 5)."""

import pytest
import torch

from optarium.ot import _linalg
from optarium.soft import _anchor_plan as _ot
from optarium.soft._anchor_plan import _solve, transport_plan

torch.set_num_threads(1)
F64 = torch.float64


def _problem(n, m=None, batch=(), seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    m = m or n
    x = torch.rand(*batch, n, generator=g, dtype=dtype)
    a = torch.linspace(0, 1, m, dtype=dtype)
    nu = torch.full((m,), 1.0 / m, dtype=dtype)
    return x, a, nu


@pytest.mark.parametrize("dtype,tol_col", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_smooth_marginals_columns_exact_rows_within_tol(dtype, tol_col):
    x, a, nu = _problem(64, batch=(3,), dtype=dtype)
    P = transport_plan(x, a, nu, 0.1, "smooth")
    n = x.shape[-1]
    assert (P >= 0).all()
    # The anchor marginal (SoftIndex axis: each column / nu_j sums to 1 over the inputs) is exact.
    assert float((P.sum(-2) / nu - 1).abs().max()) <= tol_col
    # The input marginal carries the solver error (relative, sinkhorn_tol = 1e-5 default).
    assert float(n * (P.sum(-1) - 1.0 / n).abs().max()) <= 2e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_smooth_small_softness_is_finite_and_near_permutation(dtype):
    _, a, nu = _problem(8, dtype=dtype)
    g = torch.Generator().manual_seed(0)
    x = (a[torch.randperm(8, generator=g)] + 0.02 * torch.rand(8, generator=g, dtype=dtype)).clamp(0, 1)
    P = transport_plan(x, a, nu, 1e-3, "smooth", sinkhorn_max_iter=20_000)
    assert torch.isfinite(P).all()
    assert float((P.sum(-2) / nu - 1).abs().max()) < (1e-12 if dtype == F64 else 1e-6)
    hard = torch.zeros(8, 8, dtype=dtype)
    hard[torch.argsort(x), torch.arange(8)] = 1.0
    assert float((8 * P - hard).abs().max()) < 0.05


def test_smooth_matches_pot_sinkhorn_log():
    ot = pytest.importorskip("ot", reason="POT is the independent reference for entropic OT")
    x, a, nu = _problem(12, m=5, seed=1)
    nu = torch.tensor([0.1, 0.3, 0.2, 0.25, 0.15], dtype=F64)
    C = (x[:, None] - a[None]) ** 2
    mu = torch.full((12,), 1 / 12, dtype=F64)
    ref = ot.bregman.sinkhorn_log(mu, nu, C, 0.1, stopThr=1e-13, numItermax=100_000)
    P = transport_plan(x, a, nu, 0.1, "smooth", sinkhorn_tol=1e-13)
    assert float((P - ref).abs().max()) < 1e-10


def test_smooth_matches_softtorch_wheel_forward():
    pytest.importorskip("softtorch", reason="softtorch 0.1.1 is the parity reference")
    from softtorch.projections_transport_polytope import _proj_transport_polytope

    x, a, nu = _problem(10, batch=(2,), seed=2)
    C = (x[..., :, None] - a[None, :]) ** 2
    ref = _proj_transport_polytope(C, nu, nu, softness=0.1, mode="smooth", sinkhorn_tol=1e-9)  # n * Gamma
    P = transport_plan(x, a, nu, 0.1, "smooth", sinkhorn_tol=1e-9)
    assert float((10 * P - ref).abs().max()) < 1e-6


def test_batched_equals_per_sample_and_broadcast_anchors():
    x, a, nu = _problem(9, batch=(2, 3), seed=3)
    P = transport_plan(x, a, nu, 0.2, "smooth", sinkhorn_tol=1e-12)
    for i in range(2):
        for j in range(3):
            Pij = transport_plan(x[i, j], a, nu, 0.2, "smooth", sinkhorn_tol=1e-12)
            assert torch.allclose(P[i, j], Pij, atol=1e-12)
    assert P.shape == (2, 3, 9, 9)


@pytest.mark.parametrize("mode", ["c0", "c1", "c2"])
@pytest.mark.parametrize("n", [4, 8, 16])
def test_pnorm_kkt_certificate(mode, n):
    x, a, nu = _problem(n, seed=n)
    s = 0.1
    P, f, g = _solve(x, a, nu, s, mode, lbfgs_tol=1e-10)
    mu = torch.full((n,), 1.0 / n, dtype=F64)
    q = _ot._Q[mode]
    p = q / (q - 1)
    C = (x[:, None] - a[None]) ** 2
    assert float(n * torch.maximum((P.sum(1) - mu).abs().max(), (P.sum(0) - nu).abs().max())) <= 1e-8
    assert (P >= 0).all()
    # Gamma is the primal map of the returned potentials (dual feasibility).
    Pmap = s ** (1 - q) * (f[:, None] + g[None] - C).clamp_min(0) ** (q - 1)
    assert float((P - Pmap).abs().max()) <= 1e-12
    primal = (C * P).sum() + (s / p) * (P**p).sum()
    dual = (
        (f * mu).sum() + (g * nu).sum() - (s / q) * ((f[:, None] + g[None] - C).clamp_min(0) / s).pow(q).sum()
    )
    assert 0 <= float(primal - dual) + 1e-12 and float(primal - dual) <= 1e-8


def test_c0_matches_pot_smooth_ot_dual_and_is_sparse():
    ot = pytest.importorskip("ot", reason="POT is the independent reference for quadratically regularised OT")
    x, a, nu = _problem(8, seed=5)
    C = (x[:, None] - a[None]) ** 2
    ref = ot.smooth.smooth_ot_dual(
        nu.numpy(), nu.numpy(), C.numpy(), 0.1, reg_type="l2", stopThr=1e-14, numItermax=100_000
    )
    P = transport_plan(x, a, nu, 0.1, "c0", lbfgs_tol=1e-12)
    assert float((P - torch.as_tensor(ref)).abs().max()) < 1e-6
    assert int((P == 0).sum()) > 0  # sparse plan


@pytest.mark.parametrize("mode", ["c0", "c1", "c2", "smooth"])
def test_small_softness_tends_to_permutation(mode):
    x = torch.tensor([0.9, 0.1, 0.5, 0.3], dtype=F64)
    a = torch.linspace(0, 1, 4, dtype=F64)
    nu = torch.full((4,), 0.25, dtype=F64)
    P = transport_plan(x, a, nu, 2e-3, mode, sinkhorn_tol=1e-4)  # Sinkhorn converges slowly at small s
    hard = torch.zeros(4, 4, dtype=F64)
    hard[torch.argsort(x), torch.arange(4)] = 1.0
    assert float((4 * P - hard).abs().max()) < 1e-3


def test_gradcheck_smooth_implicit_and_unrolled():
    x, a, nu = _problem(6, batch=(2,), seed=7)
    x.requires_grad_(True)
    nu2 = torch.tensor([0.5, 0.3, 0.2], dtype=F64)
    a2 = torch.tensor([0.0, 0.5, 1.0], dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x, a: transport_plan(x, a, nu2, 0.1, "smooth", sinkhorn_tol=1e-12),
        (x, a2),
        eps=1e-6,
        atol=1e-5,
    )
    assert torch.autograd.gradcheck(
        lambda x: transport_plan(x, a, nu, 0.2, "smooth", sinkhorn_tol=1e-12, implicit=False),
        (x,),
        eps=1e-6,
        atol=1e-5,
    )


@pytest.mark.parametrize("mode", ["c0", "c1", "c2"])
def test_gradcheck_pnorm(mode):
    x, a, nu = _problem(5, batch=(2,), seed=11)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda x: transport_plan(x, a, nu, 0.1, mode, lbfgs_tol=1e-12), (x,), eps=1e-6, atol=1e-5
    )


def test_cg_path_matches_dense_path(monkeypatch):
    x, a, nu = _problem(12, batch=(2,), seed=13)
    x.requires_grad_(True)
    w = torch.randn(2, 12, 12, dtype=F64, generator=torch.Generator().manual_seed(0))
    for mode in ("smooth", "c0"):
        P = transport_plan(x, a, nu, 0.1, mode, sinkhorn_tol=1e-12, lbfgs_tol=1e-12)
        (gd,) = torch.autograd.grad((P * w).sum(), x)
        monkeypatch.setattr(_linalg, "_DENSE_LIMIT", 0)
        P2 = transport_plan(x, a, nu, 0.1, mode, sinkhorn_tol=1e-12, lbfgs_tol=1e-12)
        (gc,) = torch.autograd.grad((P2 * w).sum(), x)
        monkeypatch.setattr(_linalg, "_DENSE_LIMIT", 128)
        assert float((P - P2).abs().max()) < 1e-9
        assert float((gd - gc).abs().max()) < 1e-7


def test_bad_input():
    x, a, nu = _problem(4)
    with pytest.raises(ValueError, match=r"^softness"):
        transport_plan(x, a, nu, 0.0, "smooth")
    with pytest.raises(ValueError, match=r"^mode"):
        transport_plan(x, a, nu, 0.1, "hard")
    with pytest.raises(ValueError, match=r"^nu"):
        transport_plan(x, a, nu[:3], 0.1, "smooth")
    with pytest.raises(ValueError, match=r"^mu"):
        transport_plan(x, a, nu, 0.1, "smooth", mu=torch.ones(3) / 3)
