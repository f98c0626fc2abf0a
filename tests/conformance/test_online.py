"""Online learners pass the online contract (optarium.testing.online), and each check catches a broken one."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from optarium.online import Ball, OnlineGradientDescent, OnlineLearner, OnlineRunner, run_online
from optarium.testing.online import CHECKS, OnlineCase, online_cases

CASES = online_cases()


@pytest.mark.parametrize("check", list(CHECKS), ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance(case: OnlineCase, check: str) -> None:
    if check in case.exempt:
        pytest.skip(f"{case.name} is exempt from {check}: {case.exempt[check]}")
    CHECKS[check](case)


def test_the_runner_keeps_round_count_regret_and_violation() -> None:
    u = torch.tensor([0.5, 0.0], dtype=torch.float64)
    rounds = [(lambda x: (x - u).pow(2).sum(), lambda x: x[0] - 0.25)] * 30
    learner = OnlineGradientDescent(torch.zeros(2, dtype=torch.float64), Ball(1.0))
    runner = run_online(learner, rounds, comparator=u)
    trace = runner.trace()
    assert runner.t == 30 and trace.steps == tuple(range(1, 31))
    losses = [float((x - u).pow(2).sum()) for x in runner.points]
    violations = [max(float(x[0]) - 0.25, 0.0) for x in runner.points]
    assert runner.regret == pytest.approx(sum(losses))  # the comparator's loss is 0
    assert runner.ccv == pytest.approx(sum(violations)) and runner.ccv > 0  # approaching u is infeasible
    assert trace.last("regret") == pytest.approx(runner.regret)
    assert trace.last("ccv") == pytest.approx(runner.ccv)
    assert isinstance(runner.learner, OnlineLearner)
    with pytest.raises(TypeError, match=r"^learner"):
        OnlineRunner(object())  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ the checks can fail


class _Broken(OnlineGradientDescent):
    """OGD with one fault."""

    fault = ""

    def __init__(self, x0: torch.Tensor, domain: Any, **kw: Any) -> None:
        if self.fault == "no_validation":
            kw.pop("lr", None)
        super().__init__(x0, domain, **kw)

    def predict(self) -> torch.Tensor:
        x = super().predict()
        if self.fault == "predict_moves":
            self.x = self.x * 0.9 + 0.01
        if self.fault == "float64":
            x = x.double()
        if self.fault == "jitter":
            x = x + 1e-3 * torch.randn_like(x)
        return x

    def update(self, loss_fn: Any, constraint_fn: Any = None) -> None:
        if self.fault == "frozen":
            return
        if self.fault == "no_projection":
            x = self.x.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(loss_fn(x), x)
            self.x = self.x - 0.5 * g
            return
        super().update(loss_fn, constraint_fn)


def _broken_case(fault: str) -> OnlineCase:
    cls = type(f"Broken_{fault}", (_Broken,), {"fault": fault})
    if fault == "no_constraint":

        def update(self: Any, loss_fn: Any) -> None:
            OnlineGradientDescent.update(self, loss_fn)

        cls.update = update  # type: ignore[method-assign]
    return OnlineCase(
        f"broken-{fault}",
        lambda x0, **kw: cls(x0, kw.pop("domain", Ball(1.5)), **kw),
        Ball(1.5),
        regret_constant=1.4143,
        invalid=[({"lr": -1.0}, "lr")],
    )


@pytest.mark.parametrize(
    ("fault", "check", "message"),
    [
        ("predict_moves", "predict", "twice moved the point"),
        ("float64", "predict", "the first point torch.float32"),
        ("no_projection", "in_domain", "left the domain"),
        ("frozen", "regret", "exceeds C D G sqrt"),
        ("no_constraint", "constraint", "must take"),
        ("jitter", "determinism", "differ"),
        ("no_validation", "bad_input", "was accepted"),
    ],
)
def test_each_check_catches_a_broken_learner(fault: str, check: str, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        CHECKS[check](_broken_case(fault))
