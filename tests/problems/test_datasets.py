"""Bundled data sets: shapes, ranges, determinism of the split."""

from __future__ import annotations

import pytest
import torch

from optarium.problems.datasets import load_digits, train_test_split


def test_digits_shape_range_and_classes() -> None:
    x, y = load_digits()
    assert x.shape == (1797, 64) and x.dtype == torch.float32
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert sorted(torch.unique(y).tolist()) == list(range(10))
    x[0, 0] = 5.0  # callers get fresh tensors
    assert float(load_digits()[0][0, 0]) != 5.0


def test_split_is_seeded_disjoint_and_complete() -> None:
    x = torch.arange(10.0).unsqueeze(1)
    y = torch.arange(10)
    a = train_test_split(x, y, 0.2, seed=3)
    b = train_test_split(x, y, 0.2, seed=3)
    assert all(torch.equal(s, t) for s, t in zip(a, b, strict=True))
    assert len(a[3]) == 2 and len(a[1]) == 8
    assert sorted(torch.cat([a[1], a[3]]).tolist()) == list(range(10))
    with pytest.raises(ValueError, match="test_fraction"):
        train_test_split(x, y, 1.0, seed=0)
    with pytest.raises(ValueError, match="y:"):
        train_test_split(x, y[:5], 0.2, seed=0)
