"""The synthetic distribution-shift generators: sizes, group proportions, determinism, the shift itself."""

from __future__ import annotations

import pytest
import torch

from optarium.problems.distribution_shift import covariate_shift, long_tail, spurious_correlation


def test_spurious_correlation_groups() -> None:
    d = spurious_correlation(0)
    tr = d["train"]
    assert tr.x.shape == (4000, 16) and tr.x.dtype == torch.float32
    frac = torch.bincount(tr.g, minlength=4).double() / 4000
    assert abs(float(frac[0] + frac[3]) - 0.95) < 0.02  # majority groups (y = a)
    assert torch.bincount(d["val"].g).tolist() == [250] * 4
    assert torch.bincount(d["test"].g).tolist() == [1000] * 4
    assert (
        torch.equal(tr.g, 2 * tr.y + (tr.x[:, 5] > 0).long())
        or float(((2 * tr.y + (tr.x[:, 5] > 0).long()) == tr.g).float().mean()) > 0.99
    )  # the spurious dim reveals a
    # spurious dim correlates with y in training but not in the balanced test set
    corr_tr = torch.corrcoef(torch.stack([tr.x[:, 5], tr.y.float()]))[0, 1]
    corr_te = torch.corrcoef(torch.stack([d["test"].x[:, 5], d["test"].y.float()]))[0, 1]
    assert corr_tr > 0.8 and abs(float(corr_te)) < 0.05
    assert torch.equal(spurious_correlation(0)["train"].x, tr.x)
    assert not torch.equal(spurious_correlation(1)["train"].x, tr.x)


def test_no_shift_generator() -> None:
    tr = spurious_correlation(0, p_major=0.5)["train"]
    frac = torch.bincount(tr.g, minlength=4).double() / len(tr.g)
    assert (frac - 0.25).abs().max() < 0.03


def test_long_tail_sizes() -> None:
    d = long_tail(0)
    sizes = torch.bincount(d["train"].y).tolist()
    assert sizes[0] == 500 and sizes[-1] == 5 and sizes == sorted(sizes, reverse=True)
    assert torch.bincount(d["test"].y).tolist() == [200] * 10


def test_covariate_shift() -> None:
    d = covariate_shift(0)
    assert float(d["train"].g.float().mean()) < 0.08
    assert abs(float(d["test"].g.float().mean()) - 0.5) < 0.05
    assert torch.equal(d["test"].g.bool(), d["test"].x[:, 0] > 0)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: spurious_correlation(-1), "seed"),
        (lambda: spurious_correlation(0, p_major=1.5), "p_major"),
        (lambda: long_tail(0, imbalance=0.5), "imbalance"),
        (lambda: covariate_shift(0, noise=0.0), "noise"),
    ],
)
def test_bad_input(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    assert str(e.value).startswith(name)
