"""Multi-objective problems: torch objectives equal pymoo's, known Pareto sets lie on their fronts, labels."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.bo.mo_problems import SYMPART, OmniTest, pool_pareto_set, sobol_pool

pytest.importorskip("pymoo", reason="pymoo (pinned 0.6.2) defines the problems and their Pareto sets")


@pytest.mark.parametrize("problem", [OmniTest(2), OmniTest(3), SYMPART()], ids=lambda p: f"{p.name}{p.dim}")
def test_objectives_match_pymoo(problem: OmniTest | SYMPART) -> None:
    X = sobol_pool(problem, 512, 0)
    ref = problem.pymoo_problem().evaluate(X.numpy(), return_values_of=["F"])
    torch.testing.assert_close(problem(X), torch.as_tensor(ref), rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_var", [2, 3])
def test_omnitest_pareto_set_is_on_the_front_and_undominated_by_a_dense_grid(n_var: int) -> None:
    prob = OmniTest(n_var)
    ps = prob.pareto_set(400)
    F = prob(ps)
    # front: f1 = n sin(pi a), f2 = n cos(pi a), a in [1, 1.5]: the arc f1^2 + f2^2 = n^2 with f <= 0
    torch.testing.assert_close(
        F.square().sum(-1), torch.full((F.shape[0],), float(n_var**2)), rtol=0, atol=1e-9, check_dtype=False
    )
    assert (F <= 1e-12).all()
    # every piece (one per 2 x ... x 2 cell) is represented; segments are diagonal, x_i mod 2 in [1, 1.5]
    assert prob.piece_labels(ps).unique().numel() == 3**n_var
    frac = torch.remainder(ps, 2.0)
    assert ((frac >= 1 - 1e-12) & (frac <= 1.5 + 1e-12)).all()
    assert (frac - frac[:, :1]).abs().max() < 1e-12
    # no point of a dense random sample strictly dominates a Pareto point (to rounding)
    grid = sobol_pool(prob, 20000, 1)
    G = prob(grid)
    dominated = ((G[None] <= F[:, None] - 1e-9).all(-1)).any(-1)
    assert not dominated.any()


def test_sympart_pareto_set_is_on_the_front_with_nine_pieces() -> None:
    prob = SYMPART()
    ps = prob.pareto_set(450)
    F = prob(ps)
    torch.testing.assert_close(F.sqrt().sum(-1), torch.full((F.shape[0],), 2.0, dtype=torch.float64))
    assert prob.piece_labels(ps).unique().numel() == 9
    assert prob.hit_radius == pytest.approx(4.0)
    grid = sobol_pool(prob, 20000, 2)
    assert not ((prob(grid)[None] <= F[:, None] - 1e-9).all(-1)).any()


def test_omnitest_pool_pareto_set_lies_on_the_segments_and_covers_all_pieces() -> None:
    prob = OmniTest(2)
    ps, labels = pool_pareto_set(prob, sobol_pool(prob, 2000, 0))
    assert labels.unique().numel() == 9
    frac = torch.remainder(ps, 2.0)
    # the pool is discrete: its Pareto points are near (not exactly on) the diagonal segments
    assert ((frac > 0.9) & (frac < 1.6)).all()
    assert ((frac[:, 0] - frac[:, 1]).abs() < 0.25).all()  # random points: up to 1
    assert math.isclose(prob.hit_radius, 0.12)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^n_var"):
        OmniTest(1)
    with pytest.raises(ValueError, match=r"^X"):
        OmniTest(2)(torch.zeros(3, 3))
    with pytest.raises(ValueError, match=r"^length"):
        SYMPART(length=0.0)
