"""Soft bitonic sorting network of optarium.soft._sorting_network (Petersen et al. 2021)."""

from __future__ import annotations

import itertools

import pytest
import torch

from optarium.soft._sorting_network import bitonic_stages, sorting_network

torch.set_num_threads(1)
F64 = torch.float64
MODES = ("smooth", "c0", "c1", "c2")


@pytest.mark.parametrize("n_padded", [2, 4, 8, 16])
def test_network_sorts_every_zero_one_sequence(n_padded: int) -> None:
    """0-1 principle: a comparator network sorts all inputs iff it sorts all 0/1 inputs."""
    seqs = torch.tensor(list(itertools.product([0.0, 1.0], repeat=n_padded)), dtype=F64)
    x = seqs
    for partner, gets_min in bitonic_stages(n_padded):
        xp = x[..., partner]
        x = torch.where(gets_min, torch.minimum(x, xp), torch.maximum(x, xp))
    assert torch.equal(x, torch.sort(seqs, dim=-1).values)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9])
def test_small_softness_recovers_hard_sort_and_permutation(mode: str, n: int) -> None:
    g = torch.Generator().manual_seed(n)
    x = torch.randperm(n, generator=g).to(F64) / max(n, 1) + 0.05  # gaps 1/n >> 5 * softness
    for descending in (False, True):
        vals, perm = sorting_network(x, 1e-4, mode, descending, standardized=True, return_perm=True)
        ref = torch.sort(x, descending=descending)
        torch.testing.assert_close(vals, ref.values, rtol=0, atol=1e-9)
        assert perm is not None
        torch.testing.assert_close(
            perm, torch.nn.functional.one_hot(ref.indices, n).to(F64), rtol=0, atol=1e-9
        )


@pytest.mark.parametrize("mode", MODES)
def test_permutation_is_doubly_stochastic_and_reproduces_values(mode: str) -> None:
    x = torch.rand(3, 8, dtype=F64, generator=torch.Generator().manual_seed(0))  # power of two: no padding
    vals, perm = sorting_network(x, 0.2, mode, False, standardized=True, return_perm=True)
    assert perm is not None
    assert bool((perm >= 0).all())
    torch.testing.assert_close(perm.sum(-1), torch.ones(3, 8, dtype=F64), rtol=0, atol=1e-12)
    torch.testing.assert_close(perm.sum(-2), torch.ones(3, 8, dtype=F64), rtol=0, atol=1e-12)
    torch.testing.assert_close(vals, (perm @ x.unsqueeze(-1)).squeeze(-1), rtol=0, atol=1e-12)
    # with padding the kept rows are renormalised distributions
    _, p5 = sorting_network(x[:, :5], 0.2, mode, False, standardized=True, return_perm=True)
    assert p5 is not None
    torch.testing.assert_close(p5.sum(-1), torch.ones(3, 5, dtype=F64), rtol=0, atol=1e-12)


def test_batched_equals_per_row_and_rows_are_independent() -> None:
    x = torch.randn(4, 6, dtype=F64, generator=torch.Generator().manual_seed(1))
    x[2] *= 100.0  # a row with a much larger maximum must not change the others' padding
    vals, perm = sorting_network(x, 0.3, "smooth", True, standardized=False, return_perm=True)
    assert perm is not None
    for i in range(4):
        v_i, p_i = sorting_network(x[i], 0.3, "smooth", True, standardized=False, return_perm=True)
        torch.testing.assert_close(vals[i], v_i, rtol=0, atol=1e-13)
        torch.testing.assert_close(perm[i], p_i, rtol=0, atol=1e-13)


def test_descending_is_flip() -> None:
    x = torch.rand(2, 7, dtype=F64, generator=torch.Generator().manual_seed(2))
    va, pa = sorting_network(x, 0.1, "c1", False, True, True)
    vd, pd = sorting_network(x, 0.1, "c1", True, True, True)
    torch.testing.assert_close(vd, va.flip(-1), rtol=0, atol=0)
    assert pa is not None and pd is not None
    torch.testing.assert_close(pd, pa.flip(-2), rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck(mode: str) -> None:
    x = torch.rand(2, 5, dtype=F64, generator=torch.Generator().manual_seed(3), requires_grad=True)

    def f(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        v, p = sorting_network(t, 0.1, mode, False, standardized=True, return_perm=True)
        assert p is not None
        return v, p

    assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_matches_softtorch_reference(mode: str) -> None:
    pytest.importorskip("softtorch", reason="softtorch 0.1.1 is the optional parity reference")
    from softtorch.sorting_network import _argsort_via_sorting_network, _sort_via_sorting_network

    x = torch.rand(3, 6, dtype=F64, generator=torch.Generator().manual_seed(4))
    for descending in (False, True):
        vals, perm = sorting_network(x, 0.1, mode, descending, standardized=True, return_perm=True)
        torch.testing.assert_close(
            vals, _sort_via_sorting_network(x, 0.1, mode, descending, True), atol=1e-12, rtol=0
        )
        torch.testing.assert_close(
            perm, _argsort_via_sorting_network(x, 0.1, mode, descending, True), atol=1e-12, rtol=0
        )
    # unstandardized 1-D input: SoftTorch's batch-wide pad value equals our per-row one
    x1 = torch.randn(5, dtype=F64, generator=torch.Generator().manual_seed(5))
    v1, _ = sorting_network(x1, 0.2, mode, False, standardized=False)
    torch.testing.assert_close(v1, _sort_via_sorting_network(x1, 0.2, mode, False, False), atol=1e-12, rtol=0)


def test_bad_stage_size() -> None:
    with pytest.raises(ValueError, match=r"^n_padded"):
        bitonic_stages(6)
