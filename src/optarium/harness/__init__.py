"""The experiment harness: registration, the runner over methods x seeds x scales, storage, the report.

It knows nothing about any method: experiments register themselves with :func:`register`.
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

__all__ = [
    "OUTCOMES",
    "SCALES",
    "Diverged",
    "Experiment",
    "PairedEffect",
    "RunContext",
    "RunInterrupted",
    "RunOutcome",
    "UnitTimeout",
    "Verdict",
    "get_experiment",
    "mean_sd",
    "mean_se",
    "paired_effect",
    "records_final",
    "register",
    "registered_experiments",
    "run_experiment",
    "run_suite",
]
