"""Small real data sets that ship inside installed packages (no download at run time)."""

from __future__ import annotations

from functools import cache

import torch

__all__ = ["load_digits", "train_test_split"]


@cache
def _digits_arrays() -> tuple[torch.Tensor, torch.Tensor]:
    try:
        from sklearn.datasets import load_digits as _load
    except ImportError as exc:
        raise RuntimeError(
            "the digits data set ships with scikit-learn: pip install 'optarium[experiments]'"
        ) from exc
    data = _load()
    return torch.tensor(data.data, dtype=torch.float32) / 16.0, torch.tensor(data.target, dtype=torch.long)


def load_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled 8x8 digits: ``X`` (1797 x 64, float32 in [0, 1]) and labels ``y`` (0-9).

    Cached in-process; returns fresh tensors. Raises ``RuntimeError`` if scikit-learn is not installed.
    """
    x, y = _digits_arrays()
    return x.clone(), y.clone()


def train_test_split(
    x: torch.Tensor, y: torch.Tensor, test_fraction: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A seeded split ``(x_train, y_train, x_test, y_test)`` with ``round(test_fraction * n)`` test rows.

    ``ValueError`` for a fraction outside (0, 1) or ``x`` and ``y`` of different lengths.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction: must be in (0, 1), got {test_fraction!r}")
    if len(x) != len(y):
        raise ValueError(f"y: must have {len(x)} rows like x, got {len(y)}")
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = round(test_fraction * len(y))
    test, train = perm[:n_test], perm[n_test:]
    return x[train], y[train], x[test], y[test]
