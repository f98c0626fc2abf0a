"""What every family shares: result types, the method registry, validation, seeding, timing, ask/tell."""

from optarium._core.asktell import AskTellStrategy
from optarium._core.registry import FAMILIES, MethodInfo, all_methods, get_method
from optarium._core.result import Result, Trace
from optarium._core.seeding import derive_seed, make_generator, seed_everything
from optarium._core.timing import Stopwatch
from optarium._core.validation import (
    check_betas,
    check_choice,
    check_finite,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
    check_type,
)

__all__ = [
    "FAMILIES",
    "AskTellStrategy",
    "MethodInfo",
    "Result",
    "Stopwatch",
    "Trace",
    "all_methods",
    "check_betas",
    "check_choice",
    "check_finite",
    "check_in_range",
    "check_int",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "check_type",
    "derive_seed",
    "get_method",
    "make_generator",
    "seed_everything",
]
