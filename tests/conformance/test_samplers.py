"""Every Optuna sampler optarium ships passes every sampler conformance check (optarium.testing.samplers)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("optuna", reason="the samplers target Optuna's BaseSampler API")

from optarium.testing.samplers import CHECKS, SamplerCase, sampler_cases

torch.set_num_threads(1)

CASES = sampler_cases()


@pytest.mark.parametrize("check", list(CHECKS), ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance(case: SamplerCase, check: str) -> None:
    if check in case.exempt:
        pytest.skip(f"{case.name} is exempt from {check}: {case.exempt[check]}")
    CHECKS[check](case)


def test_the_pickle_check_catches_an_unpicklable_sampler() -> None:
    """The suite can fail: a sampler holding a lambda does not pickle."""
    import optuna

    from optarium.testing.samplers import check_pickle_sampler_and_study

    class Closure(optuna.samplers.RandomSampler):
        def __init__(self, seed: int) -> None:
            super().__init__(seed=seed)
            self.fn = lambda: seed

    with pytest.raises((pickle_error(), AttributeError, TypeError)):
        check_pickle_sampler_and_study(SamplerCase("closure", Closure))


def pickle_error() -> type[Exception]:
    import pickle

    return pickle.PicklingError
