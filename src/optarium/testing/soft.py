"""The conformance suite for soft operators (:mod:`optarium.soft`): checks every soft function must pass.

An operator joins by adding a :class:`SoftOpCase` to a case table: the elementwise, logic, selection and
straight-through cases in :mod:`optarium.testing._soft_elementwise_cases`, the axis-wise ones in
:mod:`optarium.testing._soft_axiswise_cases`; :func:`soft_op_cases` collects them and
``tests/conformance/test_soft.py`` runs every check on every case. The case type and the checks live in
:mod:`optarium.testing.soft_checks` (re-exported here); they are public so a user can run them on a soft
operator of their own.

The checks (``CHECKS``: hard parity, straight-through forward, SoftIndex and SoftBool ranges, the softness
limit, gradcheck, identities, golden values, bad input, NaN input, softtorch parity) are listed with their
rules in :mod:`optarium.testing.soft_checks`.
"""

from __future__ import annotations

import importlib.util

from optarium.testing._soft_elementwise_cases import elementwise_cases
from optarium.testing.soft_checks import (
    CHECKS,
    BadInput,
    Golden,
    SoftOpCase,
    call,
    check_bad_input,
    check_golden,
    check_gradcheck,
    check_hard_parity,
    check_identities,
    check_limit,
    check_nan_input,
    check_reference_parity,
    check_soft_index,
    check_softbool_range,
    check_st_forward,
    leaves,
)

__all__ = [
    "CHECKS",
    "BadInput",
    "Golden",
    "SoftOpCase",
    "call",
    "check_bad_input",
    "check_golden",
    "check_gradcheck",
    "check_hard_parity",
    "check_identities",
    "check_limit",
    "check_nan_input",
    "check_reference_parity",
    "check_soft_index",
    "check_softbool_range",
    "check_st_forward",
    "elementwise_cases",
    "leaves",
    "soft_op_cases",
]


def _axiswise_present() -> bool:
    return importlib.util.find_spec("optarium.testing._soft_axiswise_cases") is not None


def soft_op_cases() -> list[SoftOpCase]:
    """Every soft operator's case: the elementwise / logic / selection ones and the axis-wise ones."""
    cases = elementwise_cases()
    if not _axiswise_present():
        return cases  # the axis-wise cases land separately; tolerated only until they do
    from optarium.testing._soft_axiswise_cases import axiswise_cases

    return cases + list(axiswise_cases())
