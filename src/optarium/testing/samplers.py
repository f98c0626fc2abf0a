"""The Optuna-sampler conformance suite: checks every sampler optarium ships must pass.

Restated in our own words from what Optuna's own sampler tests (``tests/samplers_tests/test_samplers.py``)
check of every ``BaseSampler``: suggested values lie in their distribution (linear and log floats); a
parameter fixed by ``low == high`` always takes its one value and does not break later trials; the same
seed gives the same trials; the sampler pickles, and so does a study using it, which then continues (the
resume recipe of Optuna's FAQ); failed, pruned and NaN-valued trials do not break later trials; parameters
that appear only in some trials (a dynamic search space) are sampled in range; ``reseed_rng`` and
``n_jobs > 1`` work; enqueued trials keep their fixed parameters; integer, stepped, log and categorical
parameters are sampled inside their distributions (optarium encodes them as Optuna's own model-based
samplers do).

A sampler joins by adding a :class:`SamplerCase` to :func:`sampler_cases`; ``tests/conformance/
test_samplers.py`` runs every check on every case. Optuna is imported by the checks, not at import time.
"""

from __future__ import annotations

import functools
import math
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "CHECKS",
    "SamplerCase",
    "check_dynamic_search_space",
    "check_enqueued_trials_kept",
    "check_every_distribution_in_range",
    "check_failed_pruned_and_nan_trials",
    "check_float_in_bounds",
    "check_pickle_sampler_and_study",
    "check_reproducible",
    "check_reseed_and_threads",
    "check_single_distribution",
    "sampler_cases",
]


@dataclass(frozen=True)
class SamplerCase:
    """One sampler to check: ``make(seed)`` returns a fresh sampler; ``trials`` per check."""

    name: str
    make: Callable[[int], Any]
    trials: int = 12
    exempt: Mapping[str, str] = field(default_factory=dict)


def _optuna() -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _objective(trial: Any) -> float:
    x = trial.suggest_float("x", -3.0, 2.0)
    y = trial.suggest_float("y", 1e-3, 10.0, log=True)
    return (x - 0.5) ** 2 + math.log10(y) ** 2


def check_float_in_bounds(case: SamplerCase) -> None:
    """Every suggested float lies in [low, high], linear and log."""
    study = _optuna().create_study(sampler=case.make(0))
    study.optimize(_objective, n_trials=case.trials)
    for t in study.trials:
        assert -3.0 <= t.params["x"] <= 2.0, f"{case.name}: x = {t.params['x']} outside [-3, 2]"
        assert 1e-3 <= t.params["y"] <= 10.0, f"{case.name}: y = {t.params['y']} outside [1e-3, 10]"


def check_single_distribution(case: SamplerCase) -> None:
    """A parameter fixed by ``low == high`` always takes its value, and later trials still complete."""
    optuna = _optuna()
    study = optuna.create_study(sampler=case.make(0))

    def objective(trial: Any) -> float:
        fixed = trial.suggest_float("fixed", 1.5, 1.5)
        fixed_log = trial.suggest_float("fixed_log", 0.1, 0.1, log=True)
        return _objective(trial) + fixed + fixed_log

    study.optimize(objective, n_trials=case.trials, catch=())
    states = {t.state for t in study.trials}
    assert states == {optuna.trial.TrialState.COMPLETE}, f"{case.name}: trials ended in {states}"
    for t in study.trials:
        assert t.params["fixed"] == 1.5 and t.params["fixed_log"] == 0.1, f"{case.name}: {t.params}"


def check_reproducible(case: SamplerCase) -> None:
    """Two studies with samplers of the same seed propose the same parameters, trial by trial."""
    runs = []
    for _ in range(2):
        study = _optuna().create_study(sampler=case.make(3))
        study.optimize(_objective, n_trials=case.trials)
        runs.append([t.params for t in study.trials])
    assert runs[0] == runs[1], f"{case.name}: the same seed gave different trials"


def check_pickle_sampler_and_study(case: SamplerCase) -> None:
    """The sampler pickles; a study using it pickles mid-run and the unpickled study continues."""
    optuna = _optuna()
    sampler = case.make(0)
    pickle.loads(pickle.dumps(sampler))
    study = optuna.create_study(sampler=sampler)
    study.optimize(_objective, n_trials=case.trials // 2)
    restored = pickle.loads(pickle.dumps(study))
    restored.optimize(_objective, n_trials=case.trials - case.trials // 2)
    assert len(restored.trials) == case.trials
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in restored.trials)
    pickle.loads(pickle.dumps(restored.sampler))


def check_failed_pruned_and_nan_trials(case: SamplerCase) -> None:
    """Failed (exception or NaN value) and pruned trials do not break the trials after them."""
    optuna = _optuna()
    study = optuna.create_study(sampler=case.make(0))

    def objective(trial: Any) -> float:
        value = _objective(trial)
        if trial.number % 4 == 1:
            raise RuntimeError("a failed evaluation")
        if trial.number % 4 == 2:
            raise optuna.TrialPruned()
        if trial.number % 4 == 3:
            return math.nan
        return value

    study.optimize(objective, n_trials=case.trials, catch=(RuntimeError,))
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(study.trials) == case.trials and len(complete) == math.ceil(case.trials / 4), case.name
    study.optimize(_objective, n_trials=3)
    assert study.trials[-1].state == optuna.trial.TrialState.COMPLETE, case.name


def check_dynamic_search_space(case: SamplerCase) -> None:
    """A parameter present only in some trials (a conditional space) is sampled in its range."""
    study = _optuna().create_study(sampler=case.make(0))

    def objective(trial: Any) -> float:
        value = _objective(trial)
        if trial.number % 2:
            value += trial.suggest_float("z", 5.0, 6.0) - 5.0
        return value

    study.optimize(objective, n_trials=case.trials)
    zs = [t.params["z"] for t in study.trials if "z" in t.params]
    assert len(zs) == case.trials // 2 and all(5.0 <= z <= 6.0 for z in zs), f"{case.name}: z = {zs}"


def check_reseed_and_threads(case: SamplerCase) -> None:
    """``reseed_rng`` works and a study with ``n_jobs=2`` threads completes every trial."""
    optuna = _optuna()
    sampler = case.make(0)
    sampler.reseed_rng()
    study = optuna.create_study(sampler=sampler)
    study.optimize(_objective, n_trials=case.trials, n_jobs=2)
    assert len(study.trials) == case.trials
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials), case.name


def check_enqueued_trials_kept(case: SamplerCase) -> None:
    """A trial enqueued with fixed parameters is evaluated at exactly those parameters."""
    study = _optuna().create_study(sampler=case.make(0))
    study.optimize(_objective, n_trials=case.trials // 2)
    study.enqueue_trial({"x": 0.25, "y": 2.0})
    study.optimize(_objective, n_trials=2)
    t = study.trials[case.trials // 2]
    assert t.params == {"x": 0.25, "y": 2.0}, f"{case.name}: enqueued trial got {t.params}"


def check_every_distribution_in_range(case: SamplerCase) -> None:
    """Integers (linear, log, stepped), stepped floats and categoricals (``None`` among the choices) are
    sampled inside their distributions, with their types, and the same seed gives the same trials."""
    optuna = _optuna()

    def objective(t: Any) -> float:
        n = t.suggest_int("n", 0, 6)
        k = t.suggest_int("k", 1, 64, log=True)
        s = t.suggest_int("s", 2, 10, step=2)
        f = t.suggest_float("f", 0.0, 1.0, step=0.25)
        c = t.suggest_categorical("c", ["a", None, 3])
        return (n - 3) ** 2 + abs(math.log2(k) - 3) + (s - 6) ** 2 / 4 + f + float(c != "a")

    runs = []
    for _ in range(2):
        study = optuna.create_study(sampler=case.make(0))
        study.optimize(objective, n_trials=case.trials)
        runs.append([t.params for t in study.trials])
    assert runs[0] == runs[1], f"{case.name}: the same seed gave different trials"
    for p in runs[0]:
        assert isinstance(p["n"], int) and 0 <= p["n"] <= 6, f"{case.name}: n = {p['n']!r}"
        assert isinstance(p["k"], int) and 1 <= p["k"] <= 64, f"{case.name}: k = {p['k']!r}"
        assert p["s"] in (2, 4, 6, 8, 10), f"{case.name}: s = {p['s']!r}"
        assert p["f"] in (0.0, 0.25, 0.5, 0.75, 1.0), f"{case.name}: f = {p['f']!r}"
        assert p["c"] in ("a", None, 3), f"{case.name}: c = {p['c']!r}"


CHECKS: Mapping[str, Callable[[SamplerCase], Any]] = {
    "float_in_bounds": check_float_in_bounds,
    "single_distribution": check_single_distribution,
    "reproducible": check_reproducible,
    "pickle_sampler_and_study": check_pickle_sampler_and_study,
    "failed_pruned_and_nan_trials": check_failed_pruned_and_nan_trials,
    "dynamic_search_space": check_dynamic_search_space,
    "reseed_and_threads": check_reseed_and_threads,
    "enqueued_trials_kept": check_enqueued_trials_kept,
    "every_distribution_in_range": check_every_distribution_in_range,
}


def _random_search(bounds: torch.Tensor, minimize: bool, *, seed: int) -> Any:
    from optarium.bo.turbo_enn import RandomSearch

    return RandomSearch(bounds, minimize=minimize, seed=seed)


def _turbo_enn(seed: int, batch_size: int) -> Any:
    from optarium.bo.optuna_sampler import turbo_enn_sampler

    return turbo_enn_sampler(batch_size=batch_size, seed=seed, num_init=4, num_candidates=64)


def _asktell_random(seed: int) -> Any:
    from optarium.bo.optuna_sampler import asktell_sampler

    return asktell_sampler(functools.partial(_random_search, seed=seed), batch_size=2, seed=seed)


def sampler_cases() -> list[SamplerCase]:
    """Every Optuna sampler optarium ships (TuRBO-ENN, sequential and batched; the generic ask/tell one)."""
    return [
        SamplerCase("turbo_enn_sampler", functools.partial(_turbo_enn, batch_size=1)),
        SamplerCase("turbo_enn_sampler-batch3", functools.partial(_turbo_enn, batch_size=3)),
        SamplerCase("asktell_sampler-RandomSearch", _asktell_random),
    ]
