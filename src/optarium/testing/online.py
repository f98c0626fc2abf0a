r"""The online-learner conformance checks: the contract of :mod:`optarium.online.learner` and a regret bound.

A learner joins with an :class:`OnlineCase` (how to build it from a first point, its domain, the constant of
its regret bound); the checks (:data:`CHECKS`):

- ``predict``: ``predict()`` returns a detached ``(d,)`` tensor in the first point's dtype (float32,
  float64) and device (CPU, CUDA when available), and calling it twice without an ``update`` gives the same
  point (predicting changes no state);
- ``in_domain``: every played point lies in the domain, also under large adversarial gradients;
- ``regret``: on a seeded sequence of linear losses :math:`f_t(x) = \langle\theta_t, x\rangle` with
  :math:`\|\theta_t\| = G` that favour one direction, the regret against the best fixed point in hindsight
  (``domain.argmin_linear``) after :math:`T` rounds is at most :math:`C\,D\,G\sqrt T` for every
  :math:`T` checked (anytime), with the case's constant :math:`C`;
- ``constraint``: ``update`` takes a constraint function as well as ``None``; the runner's books
  (round count, cumulative violation) match the sequence;
- ``determinism``: the same sequence gives the same points;
- ``bad_input``: invalid constructor arguments raise ``ValueError``/``TypeError`` naming the argument.

The sequences are played through :class:`optarium.online.learner.OnlineRunner`, the same books every online
experiment keeps.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from optarium.online.learner import OnlineLearner, OnlineRunner

__all__ = [
    "CHECKS",
    "OnlineCase",
    "check_bad_input",
    "check_constraint",
    "check_determinism",
    "check_in_domain",
    "check_predict",
    "check_regret",
    "linear_sequence",
    "online_cases",
]


@dataclass(frozen=True)
class OnlineCase:
    """One online learner for the checks.

    Attributes:
        name: an id for the test report.
        factory: ``factory(x0, **kwargs) -> learner`` with first point ``x0`` (``(dim,)``).
        domain: the learner's feasible set (``project``, ``contains``, ``diameter(dim)``, ``argmin_linear``).
        regret_constant: :math:`C` of the bound :math:`C D G \\sqrt T` on linear losses.
        dim: the dimension of the checks.
        invalid: ``(kwargs, argument name)`` pairs that must raise naming the argument.
        exempt: check name -> why this learner is exempt.
    """

    name: str
    factory: Callable[..., OnlineLearner]
    domain: Any
    regret_constant: float
    dim: int = 3
    invalid: Sequence[tuple[Mapping[str, Any], str]] = ()
    exempt: Mapping[str, str] = field(default_factory=dict)

    def build(self, dtype: torch.dtype = torch.float64, device: str = "cpu", **kwargs: Any) -> OnlineLearner:
        """The learner from the zero point of ``dim`` in ``dtype`` on ``device``."""
        return self.factory(torch.zeros(self.dim, dtype=dtype, device=device), **kwargs)


def online_cases() -> list[OnlineCase]:
    """The cases of optarium's online learners (the reference: projected OGD on a ball and on a box; the
    anytime-coco learners and baselines declared by :func:`optarium.online.anytime_coco.online_cases`)."""
    from optarium.online import Ball, Box, OnlineGradientDescent

    invalid = [({"lr": -1.0}, "lr"), ({"lr": "fast"}, "lr"), ({"domain": object()}, "domain")]

    def ogd_ball(x0: torch.Tensor, **kw: Any) -> OnlineLearner:
        return OnlineGradientDescent(x0, kw.pop("domain", Ball(1.5)), **kw)

    def ogd_box(x0: torch.Tensor, **kw: Any) -> OnlineLearner:
        return OnlineGradientDescent(x0, kw.pop("domain", Box(-1.0, 0.5)), **kw)

    from optarium.online import anytime_coco

    return [
        OnlineCase("ogd-ball", ogd_ball, Ball(1.5), regret_constant=math.sqrt(2.0), invalid=invalid),
        OnlineCase("ogd-box", ogd_box, Box(-1.0, 0.5), regret_constant=math.sqrt(2.0), invalid=invalid),
        *anytime_coco.online_cases(),
    ]


def linear_sequence(
    dim: int, rounds: int, *, scale: float = 1.0, seed: int = 0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """``(rounds, dim)`` loss vectors of norm ``scale``: a fixed direction plus seeded noise, normalised."""
    gen = torch.Generator().manual_seed(seed)
    drift = torch.linspace(1.0, -0.5, dim, dtype=dtype)
    theta = drift + 1.5 * torch.randn(rounds, dim, generator=gen, dtype=dtype)
    return scale * theta / theta.norm(dim=-1, keepdim=True)


def _linear(theta: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: (theta.to(x) * x).sum()


def _play(case: OnlineCase, thetas: torch.Tensor, **build: Any) -> OnlineRunner:
    learner = case.build(dtype=thetas.dtype, **build)
    runner = OnlineRunner(learner)
    for theta in thetas:
        runner.round(_linear(theta))
    return runner


# ------------------------------------------------------------------------------------------------ checks


def check_predict(case: OnlineCase) -> None:
    """A detached ``(d,)`` point in the input's dtype and device; predicting twice changes nothing."""
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dtype in (torch.float32, torch.float64):
        for device in devices:
            learner = case.build(dtype=dtype, device=device)
            for _ in range(3):
                x = learner.predict()
                assert isinstance(x, torch.Tensor), f"{case.name}: predict() returned {type(x).__name__}"
                assert x.shape == (case.dim,), f"{case.name}: predict() has shape {tuple(x.shape)}"
                assert x.dtype == dtype and x.device.type == device, (
                    f"{case.name}: predict() is {x.dtype} on {x.device}, the first point {dtype} on {device}"
                )
                assert not x.requires_grad, f"{case.name}: predict() returns a tensor that requires grad"
                again = learner.predict()
                assert torch.equal(x, again), f"{case.name}: calling predict() twice moved the point"
                theta = torch.ones(case.dim, dtype=dtype, device=device)
                learner.update(_linear(theta))


def check_in_domain(case: OnlineCase) -> None:
    """Every played point is in the domain, also with gradients 100 times the usual scale."""
    for scale in (1.0, 100.0):
        runner = _play(case, linear_sequence(case.dim, 60, scale=scale, seed=1))
        for t, x in enumerate(runner.points):
            assert case.domain.contains(x), f"{case.name}: the point of round {t + 1} left the domain: {x}"


def check_regret(case: OnlineCase) -> None:
    """Regret against the best fixed point in hindsight within :math:`C D G \\sqrt T` at every checked T."""
    G, T = 1.0, 400
    thetas = linear_sequence(case.dim, T, scale=G, seed=2)
    learner = case.build(dtype=thetas.dtype)
    D = float(case.domain.diameter(case.dim))
    losses = []
    for theta in thetas:
        x = learner.predict()
        losses.append(float((theta * x).sum()))
        learner.update(_linear(theta))
    cum = torch.tensor(losses, dtype=torch.float64).cumsum(0)
    for t in (25, 100, 400):
        best = case.domain.argmin_linear(thetas[:t].sum(0))
        regret = float(cum[t - 1]) - float((thetas[:t] @ best).sum())
        bound = case.regret_constant * D * G * math.sqrt(t)
        assert regret <= bound, (
            f"{case.name}: regret {regret:.3f} after {t} rounds exceeds C D G sqrt(T) = {bound:.3f}"
        )


def check_constraint(case: OnlineCase) -> None:
    """``update`` accepts a constraint (and ``None``); the runner's round count and violation add up."""
    thetas = linear_sequence(case.dim, 20, seed=3)
    learner = case.build()
    runner = OnlineRunner(learner, comparator=torch.zeros(case.dim, dtype=torch.float64))
    expected_ccv = 0.0
    for t, theta in enumerate(thetas):

        def g(x: torch.Tensor) -> torch.Tensor:
            return x.sum() - 0.1

        try:
            x = runner.round(_linear(theta), g if t % 2 == 0 else None)
        except TypeError as exc:
            raise AssertionError(f"{case.name}: update() must take (loss_fn, constraint_fn): {exc}") from exc
        if t % 2 == 0:
            expected_ccv += max(float(x.sum()) - 0.1, 0.0)
    assert runner.t == 20, f"{case.name}: the runner counted {runner.t} rounds"
    assert math.isclose(runner.ccv, expected_ccv, rel_tol=1e-12, abs_tol=1e-12), f"{case.name}: ccv"
    assert len(runner.trace()) == 20 and "regret" in runner.trace().metrics


def check_determinism(case: OnlineCase) -> None:
    """The same loss sequence gives the same points."""
    thetas = linear_sequence(case.dim, 30, seed=4)
    a, b = _play(case, thetas), _play(case, thetas)
    assert all(torch.equal(x, y) for x, y in zip(a.points, b.points, strict=True)), (
        f"{case.name}: two plays of one sequence differ"
    )


def check_bad_input(case: OnlineCase) -> None:
    """Invalid constructor arguments raise ``ValueError``/``TypeError`` whose message starts with the name."""
    assert case.invalid, f"{case.name}: declares no invalid arguments"
    for kwargs, name in case.invalid:
        try:
            case.build(**kwargs)
        except (ValueError, TypeError) as exc:
            assert re.match(rf"{re.escape(name)}\b", str(exc)), f"{case.name}: {exc!r} does not name {name}"
        except Exception as exc:
            raise AssertionError(
                f"{case.name}: {dict(kwargs)} raised {type(exc).__name__}, not an error naming {name}"
            ) from exc
        else:
            raise AssertionError(f"{case.name}: {dict(kwargs)} was accepted; expected an error on {name}")


#: Check name -> check function.
CHECKS: Mapping[str, Callable[[OnlineCase], None]] = {
    "predict": check_predict,
    "in_domain": check_in_domain,
    "regret": check_regret,
    "constraint": check_constraint,
    "determinism": check_determinism,
    "bad_input": check_bad_input,
}
