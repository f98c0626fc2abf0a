"""The shared non-dominated filter against a brute-force definition, with ties, duplicates and batches."""

from __future__ import annotations

import pytest
import torch

from optarium._core import pareto
from optarium._core.pareto import non_dominated


def brute_force(F: torch.Tensor) -> torch.Tensor:
    n = F.shape[0]
    return torch.tensor(
        [not any(bool((F[j] <= F[i]).all() and (F[j] < F[i]).any()) for j in range(n)) for i in range(n)]
    )


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_matches_brute_force_with_ties_and_duplicates(m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pareto, "_BLOCK", 64)  # force several row and batch blocks in the m > 2 path
    g = torch.Generator().manual_seed(m)
    F = torch.randint(0, 4, (5, 30, m), generator=g).to(torch.float64)  # coarse grid: many ties
    F[:, 7] = F[:, 3]  # exact duplicates
    mask = non_dominated(F)
    assert mask.shape == (5, 30)
    for b in range(5):
        assert torch.equal(mask[b], brute_force(F[b])), b
    assert bool(mask[:, 3].eq(mask[:, 7]).all())  # duplicates share their status


def test_empty_and_bad_shape() -> None:
    assert non_dominated(torch.zeros(0, 2)).shape == (0,)
    with pytest.raises(ValueError, match=r"^F: must have shape"):
        non_dominated(torch.zeros(3))
