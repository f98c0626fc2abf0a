"""The experiment harness: registration, the runner over methods x seeds x scales, storage, the report.

It knows nothing about any method: experiments register themselves with :func:`register`.

An experiment's ``decide`` and ``plot`` are written with the verdict toolkit: :mod:`optarium.harness.verdicts`
(record queries such as ``select``, ``finals`` and ``by_step``; :func:`combine_outcomes` with its rule;
:func:`paired_verdict` and :func:`slope_verdict`, which return a :class:`Verdict` with their figures; slopes
and intervals) and :mod:`optarium.harness.figures` (paired gaps with SE bars, curves with seed bands), on the
statistics of :mod:`optarium.harness.stats`.
"""

from optarium.harness.experiment import (
    OUTCOMES,
    SCALES,
    Experiment,
    Verdict,
    get_experiment,
    register,
    registered_experiments,
)
from optarium.harness.runner import (
    Diverged,
    RunContext,
    RunInterrupted,
    RunOutcome,
    UnitTimeout,
    run_experiment,
    run_suite,
)
from optarium.harness.stats import PairedEffect, mean_sd, mean_se, paired_effect, records_final
from optarium.harness.verdicts import (
    SlopeFit,
    combine_outcomes,
    mean_ci,
    ols_slope,
    paired_verdict,
    slope_fit,
    slope_verdict,
)

__all__ = [
    "OUTCOMES",
    "SCALES",
    "Diverged",
    "Experiment",
    "PairedEffect",
    "RunContext",
    "RunInterrupted",
    "RunOutcome",
    "SlopeFit",
    "UnitTimeout",
    "Verdict",
    "combine_outcomes",
    "get_experiment",
    "mean_ci",
    "mean_sd",
    "mean_se",
    "ols_slope",
    "paired_effect",
    "paired_verdict",
    "records_final",
    "register",
    "registered_experiments",
    "run_experiment",
    "run_suite",
    "slope_fit",
    "slope_verdict",
]
