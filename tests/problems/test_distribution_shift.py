"""The synthetic distribution-shift generators: sizes, group proportions, determinism, the shift itself."""

from __future__ import annotations

import pytest
import torch

from optarium.problems.distribution_shift import (
    covariate_shift,
    long_tail,
    long_tail_digits,
    spurious_correlation,
)


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


def test_long_tail_digits_sizes_disjoint_and_seeded() -> None:
    from optarium.problems.datasets import load_digits

    d = long_tail_digits(0)
    tr = d["train"]
    sizes = torch.bincount(tr.y, minlength=10)
    assert sorted(sizes.tolist(), reverse=True) == [max(1, round(90 * 100 ** (-c / 9))) for c in range(10)]
    assert int(sizes.max()) == 90 and int(sizes.min()) == 1  # the ratio 100 rounded at the one-image tail
    assert torch.bincount(d["val"].y).tolist() == [20] * 10
    assert torch.bincount(d["test"].y).tolist() == [60] * 10
    assert tr.x.shape[1] == 64 and torch.equal(tr.g, tr.y)
    x_all, _ = load_digits()
    counts: dict[tuple, int] = {}
    for r in x_all.tolist():
        counts[tuple(r)] = counts.get(tuple(r), 0) + 1
    unique = {r for r, c in counts.items() if c == 1}  # a few digit images occur twice in the data set
    rows = {k: {tuple(r) for r in v.x.tolist()} & unique for k, v in d.items()}
    assert not (rows["train"] & rows["test"]) and not (rows["train"] & rows["val"])
    assert not (rows["val"] & rows["test"])  # the splits are disjoint draws
    other = long_tail_digits(1)
    assert torch.equal(long_tail_digits(0)["train"].x, tr.x)
    assert torch.bincount(other["train"].y, minlength=10).tolist() != sizes.tolist()  # the rare digit moves


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
        (lambda: long_tail_digits(0, n_head=150), "n_head"),
        (lambda: long_tail_digits(0, imbalance=0.5), "imbalance"),
    ],
)
def test_bad_input(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    assert str(e.value).startswith(name)
