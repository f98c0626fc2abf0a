"""What every family shares: results, the solver loop, the registry, validation, seeding, timing, ask/tell.

Where to start for a new method of each kind:

- a **solver** returns a frozen, picklable :class:`Result` (``x``, ``value``, ``status`` from
  :data:`SOLVER_STATUSES`, ``n_iter``, a :class:`Trace` ``history``, ``wall_time_s``, ``extras``) and runs
  its iterations in a :class:`SolverLoop` (:mod:`optarium._core.solver`), which records the metrics every
  ``record_every`` iterations, stops on tolerance, ``max_iter``, divergence or a time budget, times itself
  with evaluation excluded, and builds the ``Result``. It declares :class:`SolverCase` objects in a
  ``solver_cases()`` function beside its code, which :mod:`optarium.testing.solvers` runs; an experiment
  logs it with ``ctx.log_result(result)``;
- a **black-box strategy** subclasses :class:`AskTellStrategy`;
- every constructor validates its arguments with the ``check_*`` helpers (messages start with the name).
"""

from optarium._core.asktell import AskTellStrategy
from optarium._core.registry import FAMILIES, MethodInfo, all_methods, get_method
from optarium._core.result import Result, Trace, same
from optarium._core.seeding import derive_seed, make_generator, seed_everything
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.status import METHOD_STATUSES, SOLVER_STATUSES, UNIT_STATUSES
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
    "METHOD_STATUSES",
    "SOLVER_STATUSES",
    "UNIT_STATUSES",
    "AskTellStrategy",
    "MethodInfo",
    "Result",
    "SolverCase",
    "SolverLoop",
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
    "same",
    "seed_everything",
]
