"""Tests for optarium.soft._smooth_sort: SoftJAX's C-infinity smooth_sort permutahedron projection."""

import itertools

import pytest
import torch

from optarium.soft._smooth_sort import (
    esp_bounds,
    smooth_sort_projection,
    smooth_sort_ranks,
    smooth_sort_values,
)

torch.set_num_threads(1)
F64 = torch.float64


def test_golden_value_from_softjax_docs():
    # SoftJAX long example: sj.sort([-0.2, -1.0, 0.3, 1.0], method="smooth_sort", softness=0.2).
    x = torch.tensor([-0.2, -1.0, 0.3, 1.0], dtype=F64)
    y = smooth_sort_values(x, 0.2)
    assert torch.allclose(y, torch.tensor([-0.8572, -0.2221, 0.2973, 0.8821], dtype=F64), atol=1e-4)


def test_esp_bounds_match_brute_force_subsets():
    w = torch.randn(7, dtype=F64, generator=torch.Generator().manual_seed(0))
    tau = 0.3
    b = esp_bounds(w, tau)
    for k in range(8):
        vals = torch.tensor(
            [float(w[list(c)].sum()) / tau for c in itertools.combinations(range(7), k)], dtype=F64
        )
        assert abs(float(tau * torch.logsumexp(vals, 0)) - float(b[k])) < 1e-10


def test_limits_and_invariants():
    x = torch.randn(3, 10, dtype=F64, generator=torch.Generator().manual_seed(1))
    hard = torch.sort(x, -1).values
    assert torch.allclose(smooth_sort_values(x, 1e-3), hard, atol=1e-3)
    y = smooth_sort_values(x, 0.5)
    assert (y[..., 1:] > y[..., :-1]).all()  # strictly increasing (entropic gaps)
    assert torch.allclose(y.sum(-1), x.sum(-1), atol=1e-9)  # sum preserved
    assert torch.allclose(smooth_sort_values(x, 0.5, descending=True), y.flip(-1))
    r = smooth_sort_ranks(x, 1e-3)
    assert torch.allclose(r, (torch.argsort(torch.argsort(-x, -1), -1) + 1).to(F64), atol=1e-3)


def test_gradcheck_values_and_ranks():
    x = torch.randn(2, 6, dtype=F64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: smooth_sort_values(x, 0.3), (x,), eps=1e-6, atol=1e-5)
    assert torch.autograd.gradcheck(lambda x: smooth_sort_ranks(x, 0.3), (x,), eps=1e-6, atol=1e-5)


def test_batched_equals_per_row():
    z = torch.randn(4, 9, dtype=F64, generator=torch.Generator().manual_seed(3))
    w = torch.randn(4, 9, dtype=F64, generator=torch.Generator().manual_seed(4))
    y = smooth_sort_projection(z, w, 0.2)
    for i in range(4):
        assert torch.allclose(y[i], smooth_sort_projection(z[i], w[i], 0.2), atol=1e-10)


def test_bad_input():
    x = torch.randn(5)
    with pytest.raises(ValueError, match=r"^mode"):
        smooth_sort_values(x, 0.1, mode="c0")
    with pytest.raises(ValueError, match=r"^softness"):
        smooth_sort_values(x, 0.0)
