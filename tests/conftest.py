"""Shared test set-up: one torch thread per xdist worker, a seed fixture, float64 helpers."""

from __future__ import annotations

import os

import pytest
import torch

torch.set_num_threads(1)

#: Seeds the ``seed`` fixture sweeps; a test that uses it must pass for every one.
SEEDS = [int(s) for s in os.environ.get("OPTARIUM_TEST_SEEDS", "0,1,2").split(",")]


@pytest.fixture(params=SEEDS, ids=lambda s: f"seed{s}")
def seed(request: pytest.FixtureRequest) -> int:
    """A seed; set OPTARIUM_TEST_SEEDS=0,1,...,9 to sweep more."""
    torch.manual_seed(request.param)
    return request.param


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA; this machine has none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
