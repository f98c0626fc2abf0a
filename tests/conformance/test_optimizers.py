"""Every registered optimizer passes every conformance check (see optarium.testing.optimizers)."""

from __future__ import annotations

import pytest

from optarium.testing.optimizers import CHECKS, OptimizerCase, optimizer_cases

CASES = optimizer_cases()


@pytest.mark.parametrize("check", list(CHECKS), ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance(case: OptimizerCase, check: str) -> None:
    CHECKS[check](case)


def test_every_case_lists_invalid_settings() -> None:
    for case in CASES:
        assert case.invalid, f"{case.name} declares no invalid hyperparameters to check"
