"""UCB and Pareto batch selection; the shared non-dominated mask against a brute-force reference."""

from __future__ import annotations

import itertools

import pytest
import torch

from optarium.bo.acquisition import non_dominated_mask, non_dominated_ranks, pareto_select, ucb_select


def _brute(Y: torch.Tensor) -> torch.Tensor:
    n = Y.shape[0]
    keep = torch.ones(n, dtype=torch.bool)
    for i, j in itertools.product(range(n), range(n)):
        if (Y[j] <= Y[i]).all() and (Y[j] < Y[i]).any():
            keep[i] = False
    return keep


@pytest.mark.parametrize("m", [1, 2, 3])
def test_non_dominated_mask_matches_brute_force_with_ties(m: int) -> None:
    g = torch.Generator().manual_seed(m)
    for _ in range(5):
        Y = torch.randint(0, 6, (30, m), generator=g).double()  # many ties and duplicates
        assert torch.equal(non_dominated_mask(Y), _brute(Y))
        assert torch.equal(non_dominated_mask(Y, maximize=True), _brute(-Y))
    Y = torch.randn(300, m, generator=g, dtype=torch.float64)
    le = (Y.unsqueeze(0) <= Y.unsqueeze(1)).all(-1)
    lt = (Y.unsqueeze(0) < Y.unsqueeze(1)).any(-1)
    assert torch.equal(non_dominated_mask(Y), ~(le & lt).any(1))


def test_ranks_peel_fronts() -> None:
    Y = torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [0.5, 3.0]], dtype=torch.float64)
    assert non_dominated_ranks(Y).tolist() == [0, 1, 2, 1]
    assert non_dominated_ranks(Y, max_fronts=1).tolist() == [0, 1, 1, 1]


def test_pareto_select_takes_whole_fronts_then_samples() -> None:
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(200, generator=g, dtype=torch.float64)
    std = torch.rand(200, generator=g, dtype=torch.float64)
    Y = torch.stack([mean, std], -1)
    ranks = non_dominated_ranks(Y, maximize=True)
    for q in (1, 5, 17, 40):
        idx = pareto_select(mean, std, q, generator=torch.Generator().manual_seed(q))
        assert idx.numel() == q and idx.unique().numel() == q
        r = ranks[idx]
        last = int(r.max())
        # all fronts before the last one used are complete
        for f in range(last):
            assert set(torch.nonzero(ranks == f).squeeze(-1).tolist()) <= set(idx.tolist())
        # points within each complete front are mutually non-dominated
        for f in range(last):
            assert non_dominated_mask(Y[idx[r == f]], maximize=True).all()
        assert (mean[idx][:-1] >= mean[idx][1:]).all()  # sorted by decreasing mean
    assert sorted(pareto_select(mean, std, 500).tolist()) == list(range(200))


def test_ucb_select_picks_the_top_scores_with_random_tie_break() -> None:
    mean = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    std = torch.tensor([3.0, 1.0, 0.1, 0.0], dtype=torch.float64)
    assert set(ucb_select(mean, std, 2, beta=1.0).tolist()) == {0, 3}
    assert set(ucb_select(mean, std, 1, beta=0.0).tolist()) == {3}
    tied = torch.zeros(50, dtype=torch.float64)
    picks = {int(ucb_select(tied, tied, 1, generator=torch.Generator().manual_seed(s))) for s in range(20)}
    assert len(picks) > 5
    a = ucb_select(tied, tied, 3, generator=torch.Generator().manual_seed(1))
    b = ucb_select(tied, tied, 3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^Y"):
        non_dominated_mask(torch.zeros(3))
    with pytest.raises(ValueError, match=r"^Y"):
        non_dominated_mask(torch.tensor([[float("nan"), 1.0]]))
    with pytest.raises(ValueError, match=r"^std"):
        ucb_select(torch.zeros(3), torch.zeros(4), 1)
    with pytest.raises(ValueError, match=r"^q"):
        pareto_select(torch.zeros(3), torch.zeros(3), 0)
    with pytest.raises(TypeError, match=r"^mean"):
        ucb_select([0.0], torch.zeros(1), 1)
