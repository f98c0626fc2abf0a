"""The ask/tell base: validation of what is told, the incumbent, and resuming from a state dict."""

from __future__ import annotations

import pytest
import torch

from optarium.testing.asktell import RandomSearch  # the smallest strategy the base supports

BOUNDS = torch.tensor([[-1.0, 0.0], [1.0, 5.0]])


def sphere(x: torch.Tensor) -> torch.Tensor:
    return (x**2).sum(-1)


def test_ask_within_bounds_and_incumbent() -> None:
    s = RandomSearch(BOUNDS, generator=torch.Generator().manual_seed(0))
    for _ in range(5):
        x = s.ask(8)
        assert x.shape == (8, 2) and x.dtype == torch.float64
        assert ((x >= BOUNDS[0].double()) & (x <= BOUNDS[1].double())).all()
        s.tell(x, sphere(x))
    assert s.best_y == float(sphere(s.X).min())
    assert torch.equal(s.best_x, s.X[sphere(s.X).argmin()])
    m = RandomSearch(BOUNDS, minimize=False)
    x = m.ask(4)
    m.tell(x, sphere(x))
    assert m.best_y == float(sphere(x).max())


@pytest.mark.parametrize(
    ("x", "y", "pattern"),
    [
        (torch.zeros(2, 3), torch.zeros(2), "x: must have shape"),
        (torch.zeros(2, 2), torch.zeros(3), "y: must have shape"),
        (torch.tensor([[0.0, float("nan")]]), torch.zeros(1), "x: contains NaN"),
        (torch.zeros(1, 2), torch.tensor([float("inf")]), "y: contains NaN or inf"),
        (torch.tensor([[2.0, 1.0]]), torch.zeros(1), "outside the bounds"),
    ],
)
def test_tell_rejects_bad_input(x: torch.Tensor, y: torch.Tensor, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        RandomSearch(BOUNDS).tell(x, y)


def test_bad_bounds_and_n() -> None:
    with pytest.raises(ValueError, match="bounds"):
        RandomSearch(torch.tensor([[0.0, 1.0], [0.0, 2.0]]))
    with pytest.raises(ValueError, match="bounds"):
        RandomSearch(torch.zeros(3, 2))
    with pytest.raises(ValueError, match=r"^n:"):
        RandomSearch(BOUNDS).ask(0)
    with pytest.raises(RuntimeError, match="no evaluations"):
        _ = RandomSearch(BOUNDS).best_y


def test_state_dict_resume_continues_identically() -> None:
    a = RandomSearch(BOUNDS, generator=torch.Generator().manual_seed(3))
    x = a.ask(4)
    a.tell(x, sphere(x))
    b = RandomSearch(BOUNDS, generator=torch.Generator().manual_seed(99))
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.ask(5), b.ask(5))
    assert b.best_y == a.best_y
    with pytest.raises(ValueError, match="bounds"):
        RandomSearch(BOUNDS * 2).load_state_dict(a.state_dict())


def test_multi_objective_pareto_set_matches_brute_force() -> None:
    s = RandomSearch(BOUNDS, n_objectives=2, generator=torch.Generator().manual_seed(1))
    x = s.ask(40)
    y = torch.stack([sphere(x), sphere(x - 0.5)], dim=1)
    s.tell(x, y)
    keep = [
        i for i in range(40) if not any(bool((y[j] <= y[i]).all() and (y[j] < y[i]).any()) for j in range(40))
    ]
    assert torch.equal(s.pareto_x, x[keep]) and torch.equal(s.pareto_y, y[keep])
    with pytest.raises(RuntimeError, match="pareto_x"):
        _ = s.best_x
    with pytest.raises(ValueError, match=r"^y: must have shape"):
        s.tell(x[:2], y[:2, 0])
    with pytest.raises(ValueError, match=r"^n_objectives"):
        RandomSearch(BOUNDS, n_objectives=0)


def test_maximisation_pareto_set_and_standardised_targets_are_signed() -> None:
    s = RandomSearch(BOUNDS, n_objectives=2, minimize=False)
    x = s.ask(3)
    y = torch.tensor([[1.0, 3.0], [2.0, 2.0], [0.5, 0.5]], dtype=torch.float64)
    s.tell(x, y)
    assert torch.equal(s.pareto_y, y[:2])
    z = s.standardized_Y()
    assert torch.allclose(z.mean(0), torch.zeros(2, dtype=z.dtype), atol=1e-12)
    assert torch.allclose(z.std(0), torch.ones(2, dtype=z.dtype), atol=1e-12)
    assert bool((z[:, 0].argsort() == torch.tensor([1, 0, 2])).all())  # largest y is smallest z


def test_state_dict_refuses_a_different_number_of_objectives() -> None:
    s = RandomSearch(BOUNDS, n_objectives=2)
    x = s.ask(2)
    s.tell(x, torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="objectives"):
        RandomSearch(BOUNDS).load_state_dict(s.state_dict())
    t = RandomSearch(BOUNDS, n_objectives=2)
    t.load_state_dict(s.state_dict())
    assert torch.equal(t.Y, s.Y)


def test_load_state_dict_of_an_empty_or_partial_state_names_state_dict_and_the_key() -> None:
    """Issue 12: ``load_state_dict({})`` raised ``KeyError: 'bounds'``."""
    s = RandomSearch(BOUNDS, seed=0)
    with pytest.raises(ValueError, match=r"^state_dict: missing key\(s\) 'bounds', 'minimize', 'X', 'Y'"):
        s.load_state_dict({})
    with pytest.raises(TypeError, match=r"^state_dict: must be a dict"):
        s.load_state_dict([("bounds", BOUNDS)])


def test_a_subclass_key_error_becomes_a_value_error_naming_the_key() -> None:
    class WithExtra(RandomSearch):
        def state_dict(self):
            return {**super().state_dict(), "extra": 1}

        def load_state_dict(self, state):
            super().load_state_dict(state)
            self.extra = state["extra"]

    s = WithExtra(BOUNDS, seed=0)
    state = s.state_dict()
    del state["extra"]
    with pytest.raises(ValueError, match=r"^state_dict: missing key 'extra'"):
        WithExtra(BOUNDS, seed=1).load_state_dict(state)


def test_seed_is_the_seeded_generator_and_refuses_both() -> None:
    a = RandomSearch(BOUNDS, seed=7).ask(3)
    b = RandomSearch(BOUNDS, generator=torch.Generator().manual_seed(7)).ask(3)
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match=r"^seed: give seed or generator, not both"):
        RandomSearch(BOUNDS, seed=1, generator=torch.Generator())
    with pytest.raises(TypeError, match=r"^generator:"):
        RandomSearch(BOUNDS, generator=3)
