"""Multi-objective metrics: EMD (exact hand values, limits, POT bound), hypervolume, hypervolume improvement,
pieces hit."""

from __future__ import annotations

import pytest
import torch

from optarium.bo.metrics import (
    expected_minimum_distance,
    hypervolume,
    hypervolume_improvement,
    pieces_hit,
    rediscovery_ratio,
)


def test_emd_zero_when_evaluated_contains_pareto_set_and_exact_on_hand_example() -> None:
    ps = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    assert expected_minimum_distance(ps, torch.cat([ps, torch.rand(5, 2, dtype=torch.float64)])) == 0.0
    a = torch.tensor([[0.0, 1.0], [3.0, 0.0]], dtype=torch.float64)
    # nearest distances: (0,0)->(0,1): 1; (1,0)->(0,1): sqrt 2; (0,2)->(0,1): 1
    assert expected_minimum_distance(ps, a) == pytest.approx((2 + 2**0.5) / 3, rel=1e-15)


def test_emd_is_order_invariant_and_weakly_decreasing_when_points_are_added() -> None:
    g = torch.Generator().manual_seed(0)
    ps = torch.rand(40, 3, generator=g, dtype=torch.float64)
    a = torch.rand(25, 3, generator=g, dtype=torch.float64)
    base = expected_minimum_distance(ps, a)
    assert expected_minimum_distance(ps, a[torch.randperm(25, generator=g)]) == pytest.approx(base, abs=1e-15)
    prev = base
    for extra in torch.rand(10, 3, generator=g, dtype=torch.float64):
        a = torch.cat([a, extra[None]])
        cur = expected_minimum_distance(ps, a)
        assert cur <= prev + 1e-15
        prev = cur
    assert prev < base  # ten random additions strictly help on 40 targets


def test_emd_lower_bounds_the_wasserstein_distance_and_matches_it_for_a_bijective_nn_map() -> None:
    ot = pytest.importorskip(
        "ot", reason="POT (pinned 0.9.7.post1) gives the earth mover's distance reference"
    )
    g = torch.Generator().manual_seed(1)
    ps = torch.rand(30, 2, generator=g, dtype=torch.float64)
    a = torch.rand(20, 2, generator=g, dtype=torch.float64)
    w1 = ot.emd2(ot.unif(30), ot.unif(20), ot.dist(ps.numpy(), a.numpy(), metric="euclidean"))
    assert expected_minimum_distance(ps, a) <= w1 + 1e-12
    # a tiny perturbation of a permutation of X*: nearest neighbours form a bijection, so EMD = W1
    near = ps[torch.randperm(30, generator=g)] + 1e-4 * torch.randn(30, 2, generator=g, dtype=torch.float64)
    w1 = ot.emd2(ot.unif(30), ot.unif(30), ot.dist(ps.numpy(), near.numpy(), metric="euclidean"))
    assert expected_minimum_distance(ps, near) == pytest.approx(w1, rel=1e-9)
    assert expected_minimum_distance(ps, ps) == pytest.approx(
        ot.emd2(ot.unif(30), ot.unif(30), ot.dist(ps.numpy(), ps.numpy(), metric="euclidean")), abs=1e-8
    )


def test_hypervolume_hand_computed_2d_and_sense() -> None:
    # minimisation, ref (4, 4): points (1, 3), (2, 2), (3, 1) -> staircase area 3 + 2 + 1 = 6
    Y = torch.tensor([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [3.5, 3.5], [5.0, 0.0]], dtype=torch.float64)
    ref = torch.tensor([4.0, 4.0], dtype=torch.float64)
    assert hypervolume(Y, ref) == pytest.approx(6.0, abs=1e-12)
    # the same set in the maximisation sense: negate both
    assert hypervolume(-Y, -ref, minimize=False) == pytest.approx(6.0, abs=1e-12)
    # dominated points and points beyond the reference add nothing; empty sets have zero volume
    assert hypervolume(Y[:3], ref) == pytest.approx(6.0, abs=1e-12)
    assert hypervolume(Y[3:4] + 1.0, ref) == 0.0


def test_hypervolume_agrees_with_pymoo() -> None:
    pytest.importorskip("pymoo", reason="pymoo (pinned 0.6.2) HV indicator is the reference")
    from pymoo.indicators.hv import HV

    g = torch.Generator().manual_seed(3)
    Y = torch.rand(30, 3, generator=g, dtype=torch.float64)
    ref = torch.full((3,), 1.1, dtype=torch.float64)
    assert hypervolume(Y, ref) == pytest.approx(float(HV(ref_point=ref.numpy())(Y.numpy())), rel=1e-10)


def test_hypervolume_improvement_hand_values_and_dominated_candidates_add_exactly_zero() -> None:
    front = torch.tensor([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]], dtype=torch.float64)
    ref = torch.tensor([4.0, 4.0], dtype=torch.float64)
    cand = torch.tensor(
        [[1.5, 1.5], [0.0, 0.0], [2.5, 2.5], [2.0, 2.0], [5.0, 0.0], [3.5, 0.5]], dtype=torch.float64
    )
    # (1.5, 1.5): its box 2.5 x 2.5 minus the front's part of it, 0.5 x 1 + 1 x 2 + 1 x 2.5
    want = torch.tensor([1.25, 10.0, 0.0, 0.0, 0.0, 0.25], dtype=torch.float64)
    got = hypervolume_improvement(front, cand, ref)
    assert torch.allclose(got, want, atol=1e-14, rtol=0)
    assert got[2] == 0.0 and got[3] == 0.0  # dominated / duplicate: exactly zero, no rounding residue
    assert torch.equal(hypervolume_improvement(front[:0], cand[:2], ref), torch.tensor([6.25, 16.0]).double())


@pytest.mark.parametrize("m", [2, 3])
def test_hypervolume_improvement_equals_the_hypervolume_difference(m: int) -> None:
    pytest.importorskip("pymoo", reason="pymoo (pinned 0.6.2) HV indicator is the independent reference")
    from pymoo.indicators.hv import HV

    g = torch.Generator().manual_seed(m)
    ref = torch.full((m,), 1.05, dtype=torch.float64)
    for n in (0, 1, 6):
        F = torch.rand(n, m, generator=g, dtype=torch.float64)
        C = torch.rand(12, m, generator=g, dtype=torch.float64) * 1.3 - 0.1  # some beyond ref, some dominated
        base = hypervolume(F, ref) if n else 0.0
        want = torch.tensor(
            [hypervolume(torch.cat([F, c[None]]), ref) - base for c in C], dtype=torch.float64
        )
        # pymoo's hypervolume, an implementation independent of the m = 3 fallback (which uses BoTorch's)
        hv = HV(ref_point=ref.numpy())
        hv0 = float(hv(F.numpy())) if n else 0.0
        pym = torch.tensor([float(hv(torch.cat([F, c[None]]).numpy())) - hv0 for c in C], dtype=torch.float64)
        got = hypervolume_improvement(F, C, ref)
        assert got.dtype == C.dtype and got.shape == (12,)
        assert torch.allclose(got, want, atol=1e-12, rtol=0)
        assert torch.allclose(got, pym, atol=1e-10, rtol=0)
        assert torch.equal(got == 0, want == 0)
    with pytest.raises(ValueError, match=r"^candidates"):
        hypervolume_improvement(F, C[:, :1], ref)
    with pytest.raises(ValueError, match=r"^ref_point"):
        hypervolume_improvement(F, C, ref[:1])


def test_pieces_hit_counts_labels_within_radius_and_rediscovery() -> None:
    ps = torch.tensor([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [9.0, 9.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 2])
    ev = torch.tensor([[0.1, 0.05], [5.0, 5.3], [20.0, 20.0]], dtype=torch.float64)
    assert pieces_hit(ev, ps, labels, 0.2) == 1
    assert pieces_hit(ev, ps, labels, 0.3) == 2
    assert pieces_hit(ev[:0], ps, labels, 0.3) == 0
    assert rediscovery_ratio(ps, torch.cat([ps[:2], ev])) == pytest.approx(0.5)


def test_bad_input_names_the_argument() -> None:
    ps = torch.zeros(3, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^evaluated"):
        expected_minimum_distance(ps, torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^pareto_set"):
        expected_minimum_distance(torch.full((2, 2), float("nan")), ps)
    with pytest.raises(ValueError, match=r"^ref_point"):
        hypervolume(ps, torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^Y"):
        hypervolume(torch.tensor([[float("nan"), 0.0]]), torch.zeros(2))
    with pytest.raises(ValueError, match=r"^radius"):
        pieces_hit(ps, ps, torch.zeros(3, dtype=torch.long), 0.0)
    with pytest.raises(ValueError, match=r"^labels"):
        pieces_hit(ps, ps, torch.zeros(3), 1.0)
