"""optarium.soft.selection: shapes, batch broadcasting, expectations under a SoftIndex, gradients."""

from __future__ import annotations

import pytest
import torch

import optarium.soft.selection as S

torch.set_num_threads(1)
F64 = torch.float64


def _p(*shape: int) -> torch.Tensor:
    return torch.softmax(torch.randn(*shape, dtype=F64), -1)


def test_take_along_dim_is_the_expectation_of_the_hard_selection() -> None:
    x = torch.randn(2, 5, 3, dtype=F64)
    p = _p(2, 4, 3, 5)  # k = 4 soft indices along dim 1 for every (batch, column)
    out = S.take_along_dim(x, p, dim=1)
    assert out.shape == (2, 4, 3)
    want = torch.einsum("bnc,bkcn->bkc", x, p)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-14)
    # broadcasting: a soft index shared over the batch
    shared = _p(1, 4, 3, 5)
    torch.testing.assert_close(
        S.take_along_dim(x, shared, 1), S.take_along_dim(x, shared.expand(2, -1, -1, -1), 1)
    )


def test_take_index_select_narrow_shapes_and_values() -> None:
    x = torch.randn(3, 6, dtype=F64)
    p = _p(2, 6)
    assert S.take(x, p, dim=1).shape == (3, 2)
    torch.testing.assert_close(S.take(x, p, dim=1), x @ p.T, rtol=0, atol=1e-14)
    assert S.take(x, _p(2, 18)).shape == (2,)
    q = _p(6)
    assert S.index_select(x, q, 1).shape == (3, 1) and S.index_select(x, q, 1, keepdim=False).shape == (3,)
    out = S.narrow(x, q, 4, dim=1)
    assert out.shape == (3, 4)
    want = torch.stack([torch.roll(x, -i, dims=1) @ q for i in range(4)], dim=1)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-14)


def test_narrow_wraps_cyclically_with_a_hard_start() -> None:
    x = torch.arange(5.0, dtype=F64)
    start = torch.nn.functional.one_hot(torch.tensor(3), 5).to(F64)
    assert torch.equal(S.narrow(x, start, 4), torch.tensor([3.0, 4.0, 0.0, 1.0], dtype=F64))


def test_where_mixes_and_gradients_reach_the_index() -> None:
    c = torch.tensor([0.25, 1.0], dtype=F64)
    assert torch.equal(S.where(c, torch.ones(2, dtype=F64), torch.zeros(2, dtype=F64)), c)
    x = torch.randn(4, dtype=F64)
    logits = torch.randn(4, dtype=F64, requires_grad=True)
    (g,) = torch.autograd.grad(S.index_select(x, torch.softmax(logits, 0), 0).sum(), logits)
    assert bool((g != 0).all())


def test_integration_with_soft_argmax_selects_the_max() -> None:
    pytest.importorskip("optarium.soft.axiswise", reason="axis-wise operators land separately")
    from optarium.soft.axiswise import argmax

    x = torch.randn(3, 7, dtype=F64)
    p = argmax(x, dim=1, keepdim=True, mode="hard")
    torch.testing.assert_close(S.take_along_dim(x, p, dim=1), x.max(1, keepdim=True).values, rtol=0, atol=0)


def test_dtype_promotion_and_device() -> None:
    x = torch.randn(3, 4)
    p = _p(4)
    assert S.index_select(x, p, 1).dtype == F64  # promoted like torch arithmetic
    assert S.index_select(x, p.float(), 1).dtype == torch.float32
