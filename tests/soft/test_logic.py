"""optarium.soft.logic: documented ranges (isclose, eq at ties), broadcasting, reductions, logic laws."""

from __future__ import annotations

import pytest
import torch

import optarium.soft.logic as L
from optarium.soft._common import SOFT_MODES

torch.set_num_threads(1)
F64 = torch.float64


def test_isclose_exceeds_one_at_ties_as_documented_and_clip_flag() -> None:
    x = torch.tensor([100.0, 1000.0], dtype=F64)
    v = L.isclose(x, x)
    torch.testing.assert_close(v, torch.tensor([1.005, 1.05], dtype=F64), rtol=0, atol=5e-4)
    c0 = L.isclose(x, x, mode="c0")
    tol = 1e-8 + 1e-5 * x + 1e-10
    torch.testing.assert_close(c0, 1 + tol / 0.5, rtol=0, atol=1e-9)  # 1 + (atol + rtol|y| + eps)/(5s)
    assert bool((L.isclose(x, x, clip=True) == 1).all())


@pytest.mark.parametrize("softness", [0.1, 1e-3])
def test_eq_at_ties_exceeds_one_by_about_eps_over_s(softness: float) -> None:
    x = torch.randn(5, dtype=F64)
    for mode in SOFT_MODES:
        v = L.eq(x, x, softness, mode)
        assert bool((v >= 1).all() and (v - 1 <= 1e-10 / softness).all()), (mode, v - 1)


def test_broadcasting_and_scalar_operands() -> None:
    x = torch.randn(3, 1, dtype=F64)
    y = torch.randn(1, 4, dtype=F64)
    for fn in (L.greater, L.greater_equal, L.less, L.less_equal, L.eq, L.not_equal, L.isclose):
        assert fn(x, y).shape == (3, 4)
        assert fn(x, 0.5).shape == (3, 1) and fn(x, 0.5).dtype == F64
    a, b = torch.rand(3, 1, dtype=F64), torch.rand(4, dtype=F64)
    for fn in (L.logical_and, L.logical_or, L.logical_xor):
        assert fn(a, b).shape == (3, 4)


def test_all_any_reductions() -> None:
    x = torch.rand(2, 3, 4, dtype=F64)
    torch.testing.assert_close(L.all(x), x.prod(-1), rtol=0, atol=0)
    torch.testing.assert_close(L.all(x, dim=None), x.prod(), rtol=0, atol=0)
    assert L.all(x, 1, keepdim=True).shape == (2, 1, 4) and L.any(x, None, keepdim=True).shape == (1, 1, 1)
    geo = L.all(x, 0, use_geometric_mean=True)
    torch.testing.assert_close(geo, x.log().mean(0).exp(), rtol=0, atol=1e-15)
    torch.testing.assert_close(L.any(x, 2), 1 - (1 - x).prod(2), rtol=0, atol=1e-15)
    # geometric mean: a single zero no longer zeroes the whole conjunction beyond epsilon^(1/n)
    z = torch.tensor([0.0, 1.0, 1.0, 1.0], dtype=F64)
    assert L.all(z) == 0 and abs(float(L.all(z, use_geometric_mean=True)) - 1e-10**0.25) < 1e-12


def test_fuzzy_logic_laws_on_crisp_and_soft_values() -> None:
    a, b = torch.rand(2, 50, dtype=F64)
    torch.testing.assert_close(L.logical_not(L.logical_not(a)), a, rtol=0, atol=1e-15)
    # De Morgan holds exactly for the product t-norm / probabilistic sum pair
    torch.testing.assert_close(
        L.logical_not(L.logical_and(a, b)),
        L.logical_or(L.logical_not(a), L.logical_not(b)),
        rtol=0,
        atol=1e-15,
    )
    xor = L.logical_xor(a, b)
    assert bool((xor >= 0).all() and (xor <= 1).all())
    crisp = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=F64), torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=F64)
    assert torch.equal(L.logical_xor(*crisp), torch.tensor([0.0, 1.0, 1.0, 0.0], dtype=F64))


def test_comparison_gradients_are_informative() -> None:
    x = torch.tensor([0.05, -0.3], dtype=F64, requires_grad=True)
    for fn in (L.greater, L.less_equal, L.eq, L.not_equal):
        (g,) = torch.autograd.grad(fn(x, torch.zeros(2, dtype=F64)).sum(), x)
        assert bool((g != 0).all()), fn.__name__
