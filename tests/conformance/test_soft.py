"""Every soft operator passes every conformance check (see optarium.testing.soft).

The ``reference_parity`` check compares with the ``softtorch`` 0.1.1 wheel and is skipped when the wheel is
not installed; the deliberate differences are listed per case in ``reference_skip`` (with the reason).
"""

from __future__ import annotations

import inspect

import pytest
import torch

from optarium.testing.soft import CHECKS, SoftOpCase, soft_op_cases

torch.set_num_threads(1)

CASES = soft_op_cases()


@pytest.mark.parametrize("check", list(CHECKS), ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance(case: SoftOpCase, check: str) -> None:
    if check in case.exempt:
        pytest.skip(f"{case.name} is exempt from {check}: {case.exempt[check]}")
    if check == "reference_parity":
        if case.reference is None:
            pytest.skip(f"{case.name} has no softtorch counterpart (beyond SoftTorch)")
        pytest.importorskip("softtorch", reason="softtorch 0.1.1 is the optional parity reference")
    CHECKS[check](case)


def test_case_declarations_are_complete() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "case names must be unique"
    for case in CASES:
        for check, reason in case.exempt.items():
            assert check in CHECKS and len(reason) > 30, f"{case.name}: exemption of {check} needs a reason"
        for key, reason in case.reference_skip.items():
            assert len(reason) > 20, f"{case.name}: reference_skip {key} needs a reason"


def test_every_softtorch_function_is_compared() -> None:
    """The parity checklist: each public softtorch function is the reference of some case."""
    softtorch = pytest.importorskip("softtorch", reason="softtorch 0.1.1 is the optional parity reference")
    public = {
        n
        for n in softtorch.__all__
        if inspect.isfunction(getattr(softtorch, n)) and n not in ("st", "grad_replace")
    }
    covered = {c.reference for c in CASES} | {c.reference_st for c in CASES}
    import optarium.testing.soft as ts

    if not hasattr(ts, "_axiswise_present") or ts._axiswise_present():
        missing = public - covered
    else:  # only the elementwise part has landed: check that part
        from optarium.soft import elementwise, logic, selection, straight_through

        mine = set(elementwise.__all__) | set(logic.__all__) | set(selection.__all__)
        mine |= set(straight_through.__all__)
        missing = (public & mine) - covered
    assert not missing, f"softtorch functions without a parity case: {sorted(missing)}"
