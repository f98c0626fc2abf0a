"""Every registered optimizer passes every conformance check (see optarium.testing.optimizers)."""

from __future__ import annotations

import pytest

from optarium.testing.optimizers import CHECKS, OptimizerCase, optimizer_cases

CASES = optimizer_cases()


@pytest.mark.parametrize("check", list(CHECKS), ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance(case: OptimizerCase, check: str) -> None:
    if check in case.exempt:
        pytest.skip(f"{case.name} is exempt from {check}: {case.exempt[check]}")
    CHECKS[check](case)


def test_every_case_lists_invalid_settings_and_valid_exemptions() -> None:
    for case in CASES:
        assert case.invalid, f"{case.name} declares no invalid hyperparameters to check"
        for check, reason in case.exempt.items():
            assert check in CHECKS and len(reason) > 40, f"{case.name}: exemption of {check} needs a reason"


def test_every_exported_optimizer_has_a_case() -> None:
    """An optimizer exported from optarium.optim joins the suite by registration; none may be left out."""
    import torch

    import optarium.optim

    exported = {
        name
        for name in optarium.optim.__all__
        if isinstance(getattr(optarium.optim, name), type)
        and issubclass(getattr(optarium.optim, name), torch.optim.Optimizer)
    }
    x = torch.zeros(2, requires_grad=True)
    covered = {type(case.build([x], lr=1e-2)).__name__ for case in CASES}
    aliases = {name for name in exported if getattr(optarium.optim, name).__name__ in covered}
    assert exported == aliases, f"optimizers without a conformance case: {sorted(exported - aliases)}"
