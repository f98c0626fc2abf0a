"""Every registered ask/tell strategy passes every conformance check (see optarium.testing.asktell)."""

from __future__ import annotations

import pytest

from optarium.testing.asktell import CHECKS, StrategyCase, strategy_cases

CASES = strategy_cases()


@pytest.mark.parametrize("check", list(CHECKS), ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance(case: StrategyCase, check: str) -> None:
    if check in case.exempt:
        pytest.skip(f"{case.name} is exempt from {check}: {case.exempt[check]}")
    CHECKS[check](case)


def test_exemptions_carry_reasons() -> None:
    for case in CASES:
        for check, reason in case.exempt.items():
            assert check in CHECKS and len(reason) > 40, f"{case.name}: exemption of {check} needs a reason"


def test_a_strategy_that_ignores_its_generator_fails_the_determinism_check() -> None:
    """The suite can fail: a strategy drawing from the global RNG is caught."""
    import torch

    from optarium.testing.asktell import RandomSearch, check_seeded_determinism

    class GlobalRng(RandomSearch):
        def _propose(self, n: int) -> torch.Tensor:
            u = torch.rand(n, self.dim, dtype=self.dtype)
            return self.bounds[0] + u * (self.bounds[1] - self.bounds[0])

    case = StrategyCase("global", GlobalRng, CASES[0].objective, CASES[0].bounds)
    with pytest.raises(AssertionError, match="same generator seed"):
        check_seeded_determinism(case)


def test_a_strategy_that_ignores_the_direction_fails_the_mirror_check() -> None:
    import torch

    from optarium.testing.asktell import RandomSearch, check_maximize_mirrors_minimize

    class GreedyMinimiser(RandomSearch):
        """Perturbs the smallest y whatever the direction: wrong when maximising."""

        def _propose(self, n: int) -> torch.Tensor:
            if self.Y.numel() == 0:
                return super()._propose(n)
            centre = self.X[self.Y.argmin()]
            lo, hi = self.bounds
            step = 0.1 * (hi - lo) * torch.randn(n, self.dim, generator=self.generator, dtype=self.dtype)
            return torch.minimum(torch.maximum(centre + step, lo), hi)

    case = StrategyCase("greedy", GreedyMinimiser, CASES[0].objective, CASES[0].bounds)
    with pytest.raises(AssertionError, match="differs from min"):
        check_maximize_mirrors_minimize(case)
