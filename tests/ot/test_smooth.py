"""Tests for optarium.ot.smooth: p-norm regularised OT (KKT certificate, POT, gradients, bad input)."""

from __future__ import annotations

import pytest
import torch

from optarium.ot import P_VALUES, smooth_ot

torch.set_num_threads(1)
F64 = torch.float64


def _problem(n=6, m=5, batch=(), seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    cost = torch.rand(*batch, n, m, generator=g, dtype=F64)
    a = torch.rand(*batch, n, generator=g, dtype=F64) + 0.1
    b = torch.rand(*batch, m, generator=g, dtype=F64) + 0.1
    return cost.to(dtype), (a / a.sum(-1, keepdim=True)).to(dtype), (b / b.sum(-1, keepdim=True)).to(dtype)


@pytest.mark.parametrize("p", sorted(P_VALUES))
def test_kkt_certificate_and_duality_gap(p):
    cost, a, b = _problem(batch=(2,), seed=1)
    s = 0.1
    res = smooth_ot(cost, a, b, reg=s, p=p, tol=1e-11)
    assert res.converged
    q = P_VALUES[p]
    P = res.plan
    n = cost.shape[-2]
    err = n * torch.maximum((P.sum(-1) - a).abs().amax(-1), (P.sum(-2) - b).abs().amax(-1))
    assert float(err.max()) <= 1e-11 and (P >= 0).all()
    f, g = res.potentials
    # The plan is the primal map of the potentials (dual feasibility / stationarity).
    Pmap = s ** (1 - q) * (f[..., :, None] + g[..., None, :] - cost).clamp_min(0) ** (q - 1)
    assert float((P - Pmap).abs().max()) <= 1e-12
    gap = res.value - res.dual_value
    assert float(gap.min()) >= -1e-10 and float(gap.max()) <= 1e-9


def test_l2_matches_pot_smooth_ot_dual_and_is_sparse():
    ot = pytest.importorskip("ot", reason="POT is the independent reference for quadratically regularised OT")
    cost, a, b = _problem(n=8, m=7, seed=2)
    ref = ot.smooth.smooth_ot_dual(
        a.numpy(), b.numpy(), cost.numpy(), 0.05, reg_type="l2", stopThr=1e-14, numItermax=100_000
    )
    res = smooth_ot(cost, a, b, reg=0.05, p=2, tol=1e-12)
    assert float((res.plan - torch.as_tensor(ref)).abs().max()) < 1e-6
    assert int((res.plan == 0).sum()) > 0


@pytest.mark.parametrize("p", sorted(P_VALUES))
def test_gradcheck_float64(p):
    cost, a, b = _problem(n=4, m=3, seed=3)
    cost.requires_grad_(True)

    def fn(c):
        res = smooth_ot(c, a, b, reg=0.5, p=p, tol=1e-12)
        return res.plan, res.value

    assert torch.autograd.gradcheck(fn, (cost,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_follows_cost_and_float32_is_solved_in_float64(dtype):
    cost, a, b = _problem(seed=4, dtype=dtype)
    # float32 masses agree in total only to float32 rounding, which bounds the reachable marginal error.
    res = smooth_ot(cost, a, b, reg=0.1, p=1.5, tol=1e-10 if dtype == F64 else 1e-6)
    for t in (res.plan, *res.potentials, res.value):
        assert t.dtype == dtype and t.device == cost.device
    assert res.converged


def test_max_iter_status():
    cost, a, b = _problem(n=12, m=12, seed=5)
    res = smooth_ot(cost, a, b, reg=1e-3, p=2, tol=1e-14, max_iter=1)
    assert res.status == "max_iter" and res.n_iter == 1 and len(res.history) == 1


def test_bad_input_names_the_argument():
    cost, a, b = _problem(n=4, m=3)
    cases = [
        (lambda: smooth_ot(cost, a, b, reg=0.1, p=3.0), ValueError, "p"),
        (lambda: smooth_ot(cost, a, b, reg=-1.0), ValueError, "reg"),
        (lambda: smooth_ot(cost, a, b[:2], reg=0.1), ValueError, "b"),
        (lambda: smooth_ot(cost, -a, b, reg=0.1), ValueError, "a"),
        (lambda: smooth_ot(list(cost), a, b, reg=0.1), TypeError, "cost"),
    ]
    for fn, exc, name in cases:
        with pytest.raises(exc) as info:
            fn()
        assert str(info.value).startswith(name), (name, str(info.value))
