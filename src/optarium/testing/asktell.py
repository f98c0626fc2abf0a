"""The ask/tell conformance suite: checks every black-box strategy must pass.

A strategy joins by adding a :class:`StrategyCase` to :func:`strategy_cases`;
``tests/conformance/test_asktell.py`` runs every check on every case. The checks are public so a user can run
them on a strategy of their own.

Checks: proposals have shape ``(n, d)``, the strategy's dtype and lie in the bounds, round after round; the
same generator seed gives the same proposals whatever the global torch seed (all randomness goes through the
strategy's ``torch.Generator``); a strategy rebuilt from ``state_dict()`` proposes exactly what the original
proposes next (a study stops and resumes without losing anything); maximising ``-f`` proposes exactly what
minimising ``f`` proposes (the direction is handled once, by the signed standardisation of the targets);
bad ``tell`` input (NaN or inf, points outside the bounds, wrong shapes) raises ``ValueError`` naming ``x`` or
``y``; the incumbent is the best value told (or, with several objectives, the non-dominated set); points
that were never asked may be told; ``seed=s`` is the same as ``generator=torch.Generator().manual_seed(s)``
for every strategy (giving both, or a non-integer seed, is refused naming ``seed``); ``load_state_dict`` of
an empty, partial or non-dict state raises ``ValueError`` / ``TypeError`` naming ``state_dict`` and the
missing key (never a bare ``KeyError``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from optarium._core.asktell import AskTellStrategy
from optarium.bo.turbo_enn import RandomSearch

__all__ = [
    "CHECKS",
    "RandomSearch",
    "StrategyCase",
    "check_bad_tell_raises",
    "check_incumbent",
    "check_load_state_dict_validates",
    "check_maximize_mirrors_minimize",
    "check_proposals_in_bounds",
    "check_seed_argument",
    "check_seeded_determinism",
    "check_state_dict_resume",
    "check_unasked_points_accepted",
    "strategy_cases",
]

Factory = Callable[..., AskTellStrategy]


@dataclass(frozen=True)
class StrategyCase:
    """How to build and drive one strategy for the conformance checks.

    Attributes:
        name: an id for the test report.
        factory: ``factory(bounds, *, minimize, generator, **kwargs) -> AskTellStrategy`` (``n_objectives``
            is passed for multi-objective cases).
        objective: ``f(x) -> y`` on a batch ``(n, d)``: values ``(n,)``, or ``(n, m)`` with ``m`` objectives.
        bounds: the box, shape ``(2, d)``, deliberately not the unit cube.
        rounds: ask/tell rounds each check runs (enough to get past any initial design).
        batch: points asked per round.
        n_objectives: ``m``.
        kwargs: extra keyword arguments for the factory (fast settings for inner optimisers).
        exempt: check name -> the reason it does not apply.
    """

    name: str
    factory: Factory
    objective: Callable[[torch.Tensor], torch.Tensor]
    bounds: torch.Tensor
    rounds: int = 4
    batch: int = 2
    n_objectives: int = 1
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    exempt: Mapping[str, str] = field(default_factory=dict)

    def build(self, *, minimize: bool = True, seed: int = 0) -> AskTellStrategy:
        """A fresh strategy with a generator seeded by ``seed``."""
        kwargs = dict(self.kwargs)
        if self.n_objectives > 1:
            kwargs["n_objectives"] = self.n_objectives
        return self.factory(
            self.bounds.clone(), minimize=minimize, generator=torch.Generator().manual_seed(seed), **kwargs
        )


def _drive(
    strategy: AskTellStrategy, f: Callable[[torch.Tensor], torch.Tensor], rounds: int, batch: int
) -> list[torch.Tensor]:
    asked = []
    for _ in range(rounds):
        x = strategy.ask(batch)
        asked.append(x)
        strategy.tell(x, f(x))
    return asked


def check_proposals_in_bounds(case: StrategyCase) -> None:
    """Every proposal has shape ``(n, d)`` and the strategy's dtype and lies inside the bounds."""
    s = case.build()
    d = case.bounds.shape[1]
    for x in _drive(s, case.objective, case.rounds, case.batch):
        assert x.shape == (case.batch, d), f"{case.name}: ask returned {tuple(x.shape)}"
        assert x.dtype == torch.float64, f"{case.name}: ask returned {x.dtype}"
        lo, hi = case.bounds.to(x)
        assert bool(((x >= lo) & (x <= hi)).all()), f"{case.name}: a proposal left the bounds"
    assert s.X.shape == (case.rounds * case.batch, d)


def check_seeded_determinism(case: StrategyCase) -> None:
    """The same generator seed gives the same proposals, whatever the global torch seed."""
    torch.manual_seed(1)
    a = _drive(case.build(seed=3), case.objective, case.rounds, case.batch)
    torch.manual_seed(2)
    b = _drive(case.build(seed=3), case.objective, case.rounds, case.batch)
    for i, (xa, xb) in enumerate(zip(a, b, strict=True)):
        assert torch.equal(xa, xb), f"{case.name}: round {i} differs under the same generator seed"


def check_state_dict_resume(case: StrategyCase) -> None:
    """A strategy rebuilt from ``state_dict()`` proposes exactly what the original proposes next."""
    s = case.build(seed=5)
    _drive(s, case.objective, case.rounds - 1, case.batch)
    state = copy.deepcopy(s.state_dict())
    resumed = case.build(seed=99)  # a different seed: everything must come from the state
    resumed.load_state_dict(state)
    for i in range(2):
        xa, xb = s.ask(case.batch), resumed.ask(case.batch)
        assert torch.equal(xa, xb), f"{case.name}: resumed strategy differs at round {i}"
        y = case.objective(xa)
        s.tell(xa, y)
        resumed.tell(xb, y)


def check_maximize_mirrors_minimize(case: StrategyCase) -> None:
    """Maximising ``-f`` proposes exactly what minimising ``f`` proposes."""
    a = _drive(case.build(minimize=True, seed=7), case.objective, case.rounds, case.batch)
    b = _drive(case.build(minimize=False, seed=7), lambda x: -case.objective(x), case.rounds, case.batch)
    for i, (xa, xb) in enumerate(zip(a, b, strict=True)):
        assert torch.allclose(xa, xb, rtol=0, atol=1e-9), f"{case.name}: max(-f) differs from min(f) at {i}"


def _raises(fn: Callable[[], Any], prefix: str, what: str, name: str) -> None:
    try:
        fn()
    except ValueError as exc:
        assert str(exc).startswith(prefix), f"{name}: {what} raised {exc!r}, expected it to name {prefix!r}"
    else:
        raise AssertionError(f"{name}: {what} was accepted")


def check_bad_tell_raises(case: StrategyCase) -> None:
    """NaN/inf, out-of-bounds points and wrong shapes raise ``ValueError`` naming ``x`` or ``y``."""
    s = case.build()
    x = s.ask(case.batch)
    y = case.objective(x)
    bad_y = y.clone()
    bad_y.view(-1)[0] = float("nan")
    outside = x.clone()
    outside[0, 0] = case.bounds[1, 0] + 1.0
    inf_x = x.clone()
    inf_x[0, 0] = float("inf")
    _raises(lambda: s.tell(x, bad_y), "y:", "a NaN value", case.name)
    _raises(lambda: s.tell(outside, y), "x:", "a point outside the bounds", case.name)
    _raises(lambda: s.tell(inf_x, y), "x:", "an infinite coordinate", case.name)
    _raises(lambda: s.tell(x[:, :-1], y), "x:", "x with a missing column", case.name)
    _raises(lambda: s.tell(x, y[:-1]), "y:", "y with a missing row", case.name)
    assert s.X.shape[0] == 0, f"{case.name}: rejected data was stored"


def check_incumbent(case: StrategyCase) -> None:
    """``best_y`` is the best value told (minimising and maximising); with several objectives the Pareto
    set is reported instead and ``best_x`` refuses."""
    for minimize in (True, False):
        s = case.build(minimize=minimize)
        _drive(s, case.objective, case.rounds, case.batch)
        if case.n_objectives == 1:
            want = s.Y.min() if minimize else s.Y.max()
            assert s.best_y == float(want), f"{case.name}: best_y is not the best told value"
            assert torch.equal(case.objective(s.best_x.unsqueeze(0))[0], want)
        else:
            assert s.pareto_y.ndim == 2 and s.pareto_y.shape[1] == case.n_objectives
            try:
                _ = s.best_x
            except RuntimeError:
                pass
            else:
                raise AssertionError(f"{case.name}: best_x answered with several objectives")


def check_unasked_points_accepted(case: StrategyCase) -> None:
    """Points that were never asked (a warm start) are accepted and used like any other evaluation."""
    s = case.build()
    lo, hi = case.bounds.to(torch.float64)
    g = torch.Generator().manual_seed(11)
    x = lo + (hi - lo) * torch.rand(max(case.batch, 3), lo.numel(), generator=g, dtype=torch.float64)
    s.tell(x, case.objective(x))
    nxt = s.ask(case.batch)
    assert nxt.shape == (case.batch, lo.numel()) and s.X.shape[0] == x.shape[0]


def _kwargs(case: StrategyCase) -> dict[str, Any]:
    kwargs = dict(case.kwargs)
    if case.n_objectives > 1:
        kwargs["n_objectives"] = case.n_objectives
    return kwargs


def check_seed_argument(case: StrategyCase) -> None:
    """``seed=s`` proposes what ``generator=Generator().manual_seed(s)`` does; misuse names ``seed``."""
    kwargs = _kwargs(case)
    by_seed = case.factory(case.bounds.clone(), seed=4, **kwargs)
    by_gen = case.factory(case.bounds.clone(), generator=torch.Generator().manual_seed(4), **kwargs)
    a = _drive(by_seed, case.objective, min(case.rounds, 2), case.batch)
    b = _drive(by_gen, case.objective, min(case.rounds, 2), case.batch)
    for i, (xa, xb) in enumerate(zip(a, b, strict=True)):
        assert torch.equal(xa, xb), f"{case.name}: seed=4 differs from generator seeded with 4 at round {i}"
    both = lambda: case.factory(  # noqa: E731
        case.bounds.clone(), seed=1, generator=torch.Generator().manual_seed(1), **kwargs
    )
    _raises_exc(both, ValueError, "seed", case.name, "seed and generator together")
    _raises_exc(
        lambda: case.factory(case.bounds.clone(), seed=1.5, **kwargs),
        TypeError,
        "seed",
        case.name,
        "seed=1.5",
    )
    _raises_exc(
        lambda: case.factory(case.bounds.clone(), seed=-1, **kwargs), ValueError, "seed", case.name, "seed=-1"
    )


def _raises_exc(fn: Callable[[], Any], exc: type[Exception], prefix: str, name: str, what: str) -> None:
    try:
        fn()
    except exc as err:
        assert str(err).startswith(prefix), (
            f"{name}: {what}: message {str(err)!r} does not start with {prefix!r}"
        )
    except Exception as err:
        raise AssertionError(
            f"{name}: {what} raised {type(err).__name__}: {err}, expected {exc.__name__}"
        ) from err
    else:
        raise AssertionError(f"{name}: {what} did not raise {exc.__name__}")


def check_load_state_dict_validates(case: StrategyCase) -> None:
    """An empty, partial or non-dict state is refused naming ``state_dict`` (and the missing key)."""
    s = case.build(seed=5)
    _drive(s, case.objective, 2, case.batch)
    full = s.state_dict()
    _raises_exc(
        lambda: case.build().load_state_dict({}), ValueError, "state_dict", case.name, "load_state_dict({})"
    )
    _raises_exc(
        lambda: case.build().load_state_dict([]), TypeError, "state_dict", case.name, "load_state_dict([])"
    )
    for key in full:
        partial = {k: v for k, v in full.items() if k != key}
        try:
            case.build().load_state_dict(copy.deepcopy(partial))
        except ValueError as err:
            msg = str(err)
            assert msg.startswith("state_dict") and repr(key) in msg, (
                f"{case.name}: state_dict without {key!r}: message {msg!r} must name state_dict and {key!r}"
            )
        except Exception as err:
            raise AssertionError(
                f"{case.name}: state_dict without {key!r} raised {type(err).__name__}: {err}"
            ) from err


CHECKS: Mapping[str, Callable[[StrategyCase], Any]] = {
    "proposals_in_bounds": check_proposals_in_bounds,
    "seeded_determinism": check_seeded_determinism,
    "state_dict_resume": check_state_dict_resume,
    "maximize_mirrors_minimize": check_maximize_mirrors_minimize,
    "bad_tell_raises": check_bad_tell_raises,
    "incumbent": check_incumbent,
    "unasked_points_accepted": check_unasked_points_accepted,
    "seed_argument": check_seed_argument,
    "load_state_dict_validates": check_load_state_dict_validates,
}


def _shifted_sphere(x: torch.Tensor) -> torch.Tensor:
    return ((x - 0.3) ** 2).sum(-1)


def _two_spheres(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([((x - 0.3) ** 2).sum(-1), ((x + 0.2) ** 2).sum(-1)], dim=-1)


_BOUNDS = torch.tensor([[-1.0, -2.0, 0.0], [1.0, 3.0, 0.5]], dtype=torch.float64)


def strategy_cases() -> list[StrategyCase]:
    """Every registered ask/tell strategy, with budgets small enough for the default test suite."""
    from optarium.bo.metasg_saea import MetaSGSAEA
    from optarium.bo.pfn import PFNBayesOpt, untrained_head
    from optarium.bo.pom import POM, QLogEHVI
    from optarium.bo.tcgp import TcGPEI
    from optarium.bo.turbo_enn import TurboENN, TurboGP, TurboZero

    return [
        StrategyCase("RandomSearch", RandomSearch, _shifted_sphere, _BOUNDS),
        StrategyCase("RandomSearch-2obj", RandomSearch, _two_spheres, _BOUNDS, n_objectives=2),
        StrategyCase(
            "POM",
            POM,
            _two_spheres,
            _BOUNDS,
            rounds=3,
            n_objectives=2,
            kwargs={"num_mc_samples": 64, "screen_size": 100, "num_candidates": 200},
        ),
        StrategyCase(
            "QLogEHVI",
            QLogEHVI,
            _two_spheres,
            _BOUNDS,
            rounds=3,
            n_objectives=2,
            kwargs={"num_mc_samples": 16, "subset_size": 20, "num_candidates": 100},
        ),
        StrategyCase(
            "TcGPEI",
            TcGPEI,
            _shifted_sphere,
            _BOUNDS,
            kwargs={"n_init": 4, "raw_samples": 64, "num_restarts": 1, "fit_maxiter": 30},
        ),
        StrategyCase("TurboENN-UCB", TurboENN, _shifted_sphere, _BOUNDS, rounds=5, kwargs={"num_init": 4}),
        StrategyCase(
            "TurboENN-Pareto",
            TurboENN,
            _shifted_sphere,
            _BOUNDS,
            rounds=5,
            kwargs={"num_init": 4, "acquisition": "pareto"},
        ),
        StrategyCase("TurboZero", TurboZero, _shifted_sphere, _BOUNDS, rounds=5, kwargs={"num_init": 4}),
        StrategyCase(
            "TurboGP", TurboGP, _shifted_sphere, _BOUNDS, rounds=4, kwargs={"num_init": 4, "gp_maxiter": 10}
        ),
        StrategyCase(
            "PFNBayesOpt",
            PFNBayesOpt,
            _shifted_sphere,
            _BOUNDS,
            kwargs={"head": untrained_head(3), "n_init": 3, "n_candidates": 64},
        ),
        StrategyCase(
            "MetaSGSAEA",
            MetaSGSAEA,
            _two_spheres,
            _BOUNDS,
            n_objectives=2,
            kwargs={"n_init": 4, "pop_size": 8, "generations": 2, "fit_maxiter": 10, "refit_every": 4},
        ),
    ]
