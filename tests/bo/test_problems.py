"""Test problems wrap botorch.test_functions with their known optima."""

from __future__ import annotations

import pytest
import torch

from optarium.bo.problems import PROBLEMS, make_problem

pytest.importorskip("botorch", reason="problems wrap botorch.test_functions")


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_optimum_is_attained_and_nothing_is_lower(name: str) -> None:
    fixed = PROBLEMS[name][1]
    prob = make_problem(name, fixed or 4)
    assert prob.dim == (fixed or 4)
    vals = prob(prob.optimizers)
    torch.testing.assert_close(vals, torch.full_like(vals, prob.optimal_value), atol=1e-4, rtol=0)
    g = torch.Generator().manual_seed(0)
    x = prob.bounds[0] + torch.rand(2000, prob.dim, generator=g, dtype=torch.float64) * (
        prob.bounds[1] - prob.bounds[0]
    )
    assert (prob(x) >= prob.optimal_value - 1e-6).all()


def test_matches_botorch_and_supports_box_and_shift() -> None:
    from botorch.test_functions import Ackley

    prob = make_problem("ackley", 10, bounds=(-5.0, 10.0))
    x = torch.rand(5, 10, dtype=torch.float64) * 15 - 5
    torch.testing.assert_close(prob(x), Ackley(dim=10).evaluate_true(x))
    assert prob.bounds[0, 0] == -5.0 and prob.bounds[1, 0] == 10.0
    shift = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    sph = make_problem("sphere", 3, shift=shift)
    assert float(sph(shift.unsqueeze(0))) == 0.0 and torch.equal(sph.optimizers[0], shift)
    assert sph.regret(1.5) == 1.5


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^name"):
        make_problem("nope", 2)
    with pytest.raises(ValueError, match=r"^dim"):
        make_problem("ackley")
    with pytest.raises(ValueError, match=r"^dim"):
        make_problem("branin", 3)
    with pytest.raises(ValueError, match=r"^bounds"):
        make_problem("sphere", 2, bounds=(1.0, 2.0))  # optimum outside the box
    with pytest.raises(ValueError, match=r"^x"):
        make_problem("sphere", 2)(torch.zeros(1, 3))


def test_goldstein_price_values_optimum_and_problem_wrapper() -> None:
    from botorch.test_functions.synthetic import SyntheticTestFunction

    from optarium.bo.problems import goldstein_price

    f = goldstein_price()
    assert isinstance(f, SyntheticTestFunction) and f.dim == 2
    assert f.bounds.tolist() == [[-2.0, -2.0], [2.0, 2.0]] and f.optimal_value == 3.0
    x = torch.tensor([[0.0, -1.0], [0.0, 0.0], [1.0, 1.0], [-2.0, 2.0]], dtype=torch.float64)
    # by hand: f(0,-1) = 1 * 3, f(0,0) = 20 * 30, f(1,1) = (1 + 9 * 3) * (30 + 1 * 37),
    # f(-2,2) = (1 + 1 * 19) * (30 + 100 * 478)
    assert f(x).tolist() == [3.0, 600.0, 28.0 * 67.0, 20.0 * 47830.0]
    # the minimum on a fine grid is the listed one
    g = torch.linspace(-2, 2, 401, dtype=torch.float64)
    grid = torch.cartesian_prod(g, g)
    vals = f(grid)
    assert float(vals.min()) == pytest.approx(3.0, abs=1e-12)
    torch.testing.assert_close(grid[int(vals.argmin())], torch.tensor([0.0, -1.0], dtype=torch.float64))
    neg = goldstein_price(negate=True)
    assert float(neg(x[:1])) == -3.0
    prob = make_problem("goldstein_price")
    assert prob.dim == 2 and prob.optimal_value == 3.0 and prob.name == "goldstein_price2"
    assert torch.equal(prob(x), f(x)) and prob.regret(3.5) == 0.5
